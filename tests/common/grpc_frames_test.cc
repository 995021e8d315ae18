// Frames handed to gRPC: referenced data stays alive exactly as long as
// any slice of it does, and received slices are viewed without copies.
#include "common/rpc/grpc_frames.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "proto/paramd.pb.h"

namespace paramd {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  ReceivedFrame frame;
  REQUIRE(frame.Take(buffer).ok());
  std::string out;
  for (absl::string_view s : frame.segments()) out.append(s.data(), s.size());
  return out;
}

TEST_CASE("a frame keeps its owner alive until the last slice is released",
          "[frames]") {
  auto data = std::make_shared<std::vector<char>>(1 << 20, 'd');
  std::weak_ptr<std::vector<char>> watch = data;
  grpc::ByteBuffer copy;
  {
    FrameBuilder frame(data);
    frame.AddCopy("head");
    frame.AddReference(absl::string_view(data->data(), 100));
    frame.AddCopy("mid");
    frame.AddReference(
        absl::string_view(data->data() + 100, data->size() - 100));
    grpc::ByteBuffer buffer = frame.Finish();
    data.reset();
    CHECK_FALSE(watch.expired());  // The frame holds it.
    CHECK(buffer.Length() == 4 + 3 + (1 << 20));
    const std::string flat = Flatten(buffer);
    CHECK(flat.substr(0, 4) == "head");
    CHECK(flat.substr(104, 3) == "mid");
    CHECK(flat.substr(107, 5) == "ddddd");
    copy = buffer;  // Shares the slices.
  }
  CHECK_FALSE(watch.expired());
  copy.Clear();
  CHECK(watch.expired());
}

TEST_CASE("received segments view the buffer's slices without copies",
          "[frames]") {
  std::vector<grpc::Slice> slices;
  slices.emplace_back(std::string("abc"));
  slices.emplace_back(std::string(1 << 16, 'e'));  // Refcounted, not inlined.
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  ReceivedFrame frame;
  REQUIRE(frame.Take(buffer).ok());
  std::string joined;
  bool in_place = false;
  for (absl::string_view s : frame.segments()) {
    joined.append(s.data(), s.size());
    in_place |= s.data() == reinterpret_cast<const char*>(slices[1].begin());
  }
  CHECK(joined == "abc" + std::string(1 << 16, 'e'));
  CHECK(in_place);
}

TEST_CASE("small messages go through one slice and back; garbage does not",
          "[frames]") {
  proto::PullRequest request;
  request.set_job_id("job");
  request.set_rank(3);
  request.set_clock(1234567);
  const grpc::ByteBuffer buffer = SerializeMessage(request);
  proto::PullRequest parsed;
  REQUIRE(ParseMessage(buffer, &parsed));
  CHECK(parsed.SerializeAsString() == request.SerializeAsString());
  // Split over two slices, as received, it still parses.
  const std::string bytes = request.SerializeAsString();
  std::vector<grpc::Slice> slices;
  slices.emplace_back(bytes.substr(0, 3));
  slices.emplace_back(bytes.substr(3));
  proto::PullRequest joined;
  REQUIRE(
      ParseMessage(grpc::ByteBuffer(slices.data(), slices.size()), &joined));
  CHECK(joined.clock() == 1234567);
  const std::string garbage = "\x0a\x7f\x01";
  grpc::Slice bad(garbage.data(), garbage.size());
  CHECK_FALSE(ParseMessage(grpc::ByteBuffer(&bad, 1), &parsed));
}

}  // namespace
}  // namespace paramd
