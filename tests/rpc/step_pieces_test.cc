// A StepStream step whose push comes in pieces (PushRequest.more) and whose
// reply goes out in several messages (reply_message_bytes), through a plain
// protobuf client over real gRPC, with replies as they come and held back
// by the testing faults (on the one serving path): the pieces apply once, as
// one message would; a push cut off half-way applies nothing; a retried push in
// pieces is a duplicate; a later piece naming the header fields, or more pieces
// than chunks, is refused.
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/shard_client.h"

namespace paramd {
namespace {

using Client = testing::ShardClient;
using testing::ByChunk;
using testing::ChunkBytes;
using testing::LocalCluster;
using testing::OneShardJob;
using testing::ReadReply;
using Stream =
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>;

// `push` in `n` StepStream messages linked by `more`, its reply asked for
// in messages of `reply_bytes`.
std::vector<proto::PushRequest> Pieces(const proto::PushRequest& push, int n,
                                       uint32_t reply_bytes) {
  std::vector<proto::PushRequest> pieces =
      testing::SplitPush(push, n, /*more=*/true);
  pieces[0].set_reply_message_bytes(reply_bytes);
  return pieces;
}

TEST_CASE(
    "a StepStream push in pieces applies once, as one message would, and "
    "its reply comes in messages of reply_message_bytes",
    "[integration][stepstream][pieces]") {
  const bool held_replies = GENERATE(false, true);
  INFO((held_replies ? "replies held back (testing faults)" : "plain"));
  const JobConfig config = OneShardJob(1, held_replies);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();
  REQUIRE(chunks >= 8);

  // The same two steps as one-message PushPulls on a twin shard.
  LocalCluster twin(config);
  Client reference(config, twin);
  reference.Register(0);
  std::vector<proto::PullResponse> expected(2);
  for (uint64_t clock = 0; clock < 2; ++clock) {
    grpc::ClientContext c;
    REQUIRE(reference.stub
                ->PushPull(&c,
                           reference.Gradient(0, clock, 1.0f + clock, 0.01f),
                           &expected[clock])
                .ok());
  }

  grpc::ClientContext c;
  std::unique_ptr<Stream> stream = client.stub->StepStream(&c);
  for (uint64_t clock = 0; clock < 2; ++clock) {
    for (const proto::PushRequest& piece :
         Pieces(client.Gradient(0, clock, 1.0f + clock, 0.01f), 3, 1)) {
      REQUIRE(stream->Write(piece));
    }
    std::vector<uint64_t> versions;
    CHECK(ReadReply(stream.get(), chunks, &versions) ==
          ByChunk(expected[clock]));
    // Messages closed once they hold a byte: one per chunk.
    CHECK(versions.size() == chunks);
    for (uint64_t v : versions) CHECK(v == clock + 1);
  }
  // The last step again (its reply thought lost): a duplicate, the same
  // parameters back in one message.
  for (const proto::PushRequest& piece :
       Pieces(client.Gradient(0, 1, 2.0f, 0.01f), 4, 0)) {
    REQUIRE(stream->Write(piece));
  }
  std::vector<uint64_t> versions;
  CHECK(ReadReply(stream.get(), chunks, &versions) == ByChunk(expected[1]));
  CHECK(versions == std::vector<uint64_t>{2});
  testing::CloseStep(stream.get());
  CHECK(client.Status().version() == 2);
  CHECK(client.Status().pushes() == 2);
}

TEST_CASE(
    "a StepStream push cut off between its pieces applies nothing; under "
    "sync the round waits for the rank's whole push",
    "[integration][stepstream][pieces][sync]") {
  const bool held_replies = GENERATE(false, true);
  INFO((held_replies ? "replies held back (testing faults)" : "plain"));
  const JobConfig config = OneShardJob(2, held_replies);
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();
  const std::vector<proto::PushRequest> rank1 =
      Pieces(client.Gradient(1, 0, 3.0f), 3, 0);

  // Rank 1 half-closes after its first piece: refused, nothing applied.
  {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    REQUIRE(stream->Write(rank1[0]));
    stream->WritesDone();
    const grpc::Status s = stream->Finish();
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message() ==
          "StepStream: the stream ended after message 1 of a push whose "
          "`more` said another follows; nothing applied");
  }
  // Rank 1 goes away after two pieces: nothing applied either.
  {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    REQUIRE(stream->Write(rank1[0]));
    REQUIRE(stream->Write(rank1[1]));
    c.TryCancel();
    CHECK_FALSE(stream->Finish().ok());
  }
  CHECK(client.Status().pushes() == 0);

  // Rank 0's whole push waits for the round, which rank 1's cut-off
  // pieces are not part of.
  grpc::ClientContext c0;
  auto stream0 = client.stub->StepStream(&c0);
  for (const proto::PushRequest& piece :
       Pieces(client.Gradient(0, 0, 1.0f), 2, 0)) {
    REQUIRE(stream0->Write(piece));
  }
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(1, absl::Seconds(30)));
  CHECK(client.Status().version() == 0);
  CHECK(client.Status().pushes() == 1);

  // Rank 1's retry, whole, completes it: the mean of both gradients, as on
  // a twin shard that never saw the cut-off pushes.
  LocalCluster twin(config);
  Client reference(config, twin);
  for (uint32_t rank : {0u, 1u}) reference.Register(rank);
  proto::PullResponse expected, other;
  grpc::Status first_status;
  std::thread first([&] {
    grpc::ClientContext a;
    first_status =
        reference.stub->PushPull(&a, reference.Gradient(0, 0, 1.0f), &other);
  });
  REQUIRE(reference.shard.TEST_AwaitWaitingPulls(1, absl::Seconds(30)));
  {
    grpc::ClientContext b;
    REQUIRE(
        reference.stub->PushPull(&b, reference.Gradient(1, 0, 3.0f), &expected)
            .ok());
  }
  first.join();
  REQUIRE(first_status.ok());
  grpc::ClientContext c1;
  auto stream1 = client.stub->StepStream(&c1);
  for (const proto::PushRequest& piece : rank1) REQUIRE(stream1->Write(piece));
  std::vector<uint64_t> versions;
  CHECK(ReadReply(stream1.get(), chunks, &versions) == ByChunk(expected));
  CHECK(ReadReply(stream0.get(), chunks, &versions) == ByChunk(expected));
  CHECK(versions == std::vector<uint64_t>{1, 1});
  for (Stream* s : {stream0.get(), stream1.get()}) testing::CloseStep(s);
  CHECK(client.Status().version() == 1);
  CHECK(client.Status().pushes() == 2);
}

TEST_CASE(
    "a StepStream piece after the first naming the header's fields, or more "
    "pieces than the shard has chunks, refuses the push",
    "[integration][stepstream][pieces]") {
  const bool held_replies = GENERATE(false, true);
  INFO((held_replies ? "replies held back (testing faults)" : "plain"));
  const JobConfig config = OneShardJob(1, held_replies);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  const int chunks =
      static_cast<int>(client.shard.plan().ChunksOfShard(0).size());

  auto refused = [&](const std::vector<proto::PushRequest>& pieces) {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    for (const proto::PushRequest& piece : pieces) {
      if (!stream->Write(piece)) break;
    }
    stream->WritesDone();
    return stream->Finish();
  };
  std::vector<proto::PushRequest> pieces =
      Pieces(client.Gradient(0, 0, 1.0f), 2, 0);
  pieces[1].set_clock(0);
  pieces[1].set_reply_message_bytes(4096);
  grpc::Status s = refused(pieces);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() ==
        "StepStream message 2: only the first message names job_id, rank, "
        "clock, loss, pull_dtype and reply_message_bytes");

  // Each chunk a piece of its own after a header-only first: chunks + 1
  // pieces are a push; one more, empty, is not.
  pieces = Pieces(client.Gradient(0, 0, 1.0f), chunks, 0);
  proto::PushRequest header = pieces[0];
  header.clear_chunks();
  pieces[0].clear_job_id();
  pieces[0].clear_rank();
  pieces[0].clear_clock();
  pieces.insert(pieces.begin(), header);
  pieces.insert(pieces.begin() + 1, proto::PushRequest());
  pieces[1].set_more(true);
  s = refused(pieces);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() == absl::StrCat("StepStream message ", chunks + 2,
                                          ": a push of this shard's ", chunks,
                                          " chunk(s) takes at most ",
                                          chunks + 1, " messages"));
  CHECK(client.Status().pushes() == 0);
  CHECK(client.Status().version() == 0);
}

}  // namespace
}  // namespace paramd
