// PushStream and PullStream through a plain protobuf client over real
// gRPC, with replies as they come and held back by the testing faults (on
// the one serving path, the async-API reactors): a PullStream's pull waits
// in the shard and is answered, chunk by chunk, by the round's last push;
// a cancelled one is forgotten; a PushStream cut off before its end
// applies nothing, a whole one exactly once.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/shard_client.h"

namespace paramd {
namespace {

using Client = testing::ShardClient;
using testing::LocalCluster;
using testing::OneShardJob;

proto::PullRequest PullOf(const JobConfig& config, uint32_t rank,
                          uint64_t clock) {
  proto::PullRequest req;
  req.set_job_id(config.job_id);
  req.set_rank(rank);
  req.set_clock(clock);
  req.set_stream_message_bytes(1);  // A chunk per message.
  return req;
}

TEST_CASE(
    "a PullStream waits for its round in the shard and is answered a chunk "
    "per message by the round's last push; a cancelled one is forgotten",
    "[integration][pullstream][sync]") {
  const bool held_replies = GENERATE(false, true);
  INFO((held_replies ? "replies held back (testing faults)" : "plain"));
  const JobConfig config = OneShardJob(2, held_replies);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  client.Register(1);
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();

  grpc::ClientContext waits, gives_up;
  auto reader = client.stub->PullStream(&waits, PullOf(config, 1, 1));
  auto cancelled = client.stub->PullStream(&gives_up, PullOf(config, 0, 1));
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(2, absl::Seconds(30)));
  gives_up.TryCancel();
  proto::PullResponse none;
  CHECK_FALSE(cancelled->Read(&none));
  CHECK(cancelled->Finish().error_code() == grpc::StatusCode::CANCELLED);
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(1, absl::Seconds(30)));

  // The round: rank 0's push, then rank 1's, as unary pushes.
  for (uint32_t rank : {0u, 1u}) {
    grpc::ClientContext c;
    proto::PushResponse r;
    REQUIRE(
        client.stub->Push(&c, client.Gradient(rank, 0, 1.0f + rank), &r).ok());
  }
  testing::ChunkBytes got;
  proto::PullResponse part;
  size_t messages = 0;
  while (reader->Read(&part)) {
    ++messages;
    CHECK(part.version() == 1);
    testing::AddChunks(part, &got);
  }
  const grpc::Status s = reader->Finish();
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(messages == chunks);
  CHECK(got == testing::ByChunk(client.Pull(1, 1)));
  CHECK(client.shard.TEST_AwaitWaitingPulls(0, absl::Seconds(30)));
}

TEST_CASE(
    "a PushStream cut off before its end applies nothing; a whole one "
    "applies once",
    "[integration][pushstream]") {
  const bool held_replies = GENERATE(false, true);
  INFO((held_replies ? "replies held back (testing faults)" : "plain"));
  const JobConfig config = OneShardJob(1, held_replies);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);

  // The push in three messages: the first with the header.
  const std::vector<proto::PushRequest> pieces =
      testing::SplitPush(client.Gradient(0, 0, 1.0f), 3, /*more=*/false);
  {
    grpc::ClientContext c;
    proto::PushResponse r;
    auto writer = client.stub->PushStream(&c, &r);
    REQUIRE(writer->Write(pieces[0]));
    REQUIRE(writer->Write(pieces[1]));
    c.TryCancel();
    CHECK_FALSE(writer->Finish().ok());
  }
  CHECK(client.Status().pushes() == 0);
  CHECK(client.Status().version() == 0);

  proto::PushResponse r;
  {
    grpc::ClientContext c;
    auto writer = client.stub->PushStream(&c, &r);
    for (const proto::PushRequest& piece : pieces) {
      REQUIRE(writer->Write(piece));
    }
    REQUIRE(writer->WritesDone());
    const grpc::Status s = writer->Finish();
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  CHECK(r.version() == 1);
  CHECK_FALSE(r.duplicate());
  CHECK(client.Status().pushes() == 1);
}

}  // namespace
}  // namespace paramd
