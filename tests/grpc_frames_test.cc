// Frames handed to gRPC: referenced data stays alive exactly as long as
// any slice of it does, and received slices are viewed without copies.
#include "common/rpc/grpc_frames.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace paramd
