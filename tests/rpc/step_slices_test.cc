// A full-duplex StepStream step (PushRequest.slices) through a plain
// protobuf client over real gRPC: each message's chunks are answered at
// the next version once every rank sent them, while the rest of the push
// has not been sent; the step ends exactly as a whole one; a worker cut
// off between slices leaves the chunks it sent in the round, and its
// retry is a duplicate for them; a push in slices that ends short is
// refused, naming it; a job whose shards take pushes whole answers the
// step whole.
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
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
using Stream =
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>;

// `push` in `n` StepStream messages, the first asking for slices.
std::vector<proto::PushRequest> Slices(const proto::PushRequest& push, int n) {
  std::vector<proto::PushRequest> slices =
      testing::SplitPush(push, n, /*more=*/true);
  slices[0].set_slices(true);
  return slices;
}

ChunkBytes ChunksOf(const proto::PushRequest& slice) {
  ChunkBytes out;
  for (const proto::TensorChunk& c : slice.chunks()) {
    out[{c.tensor_id(), c.chunk_index()}] = "";
  }
  return out;
}

// The chunks of one reply message: must be those of `slice`.
bool SameChunks(const proto::PullResponse& reply,
                const proto::PushRequest& slice) {
  ChunkBytes got = ByChunk(reply);
  for (auto& [key, bytes] : got) bytes.clear();
  return got == ChunksOf(slice);
}

// The version a twin shard reaches from rank 0's and rank 1's whole
// pushes of clock 0 (values 1 and 3): what every test here must end with.
proto::PullResponse TwoRankRound(const JobConfig& config) {
  LocalCluster twin(config);
  Client reference(config, twin);
  for (uint32_t rank : {0u, 1u}) reference.Register(rank);
  grpc::ClientContext c0, c1;
  proto::PushResponse r0, r1;
  REQUIRE(reference.stub->Push(&c0, reference.Gradient(0, 0, 1.0f, 0.01f), &r0)
              .ok());
  REQUIRE(reference.stub->Push(&c1, reference.Gradient(1, 0, 3.0f, 0.02f), &r1)
              .ok());
  return reference.Pull(0, 1);
}

// The reply's chunks, every message at `version`.
ChunkBytes ReadReply(Stream* stream, size_t chunks, uint64_t version) {
  std::vector<uint64_t> versions;
  ChunkBytes out = testing::ReadReply(stream, chunks, &versions);
  for (uint64_t v : versions) CHECK(v == version);
  return out;
}

TEST_CASE(
    "a step in slices is answered slice by slice while the push is still "
    "being sent, and ends as the whole step would",
    "[integration][stepstream][slices][sync]") {
  const bool held_replies = GENERATE(false, true);
  INFO((held_replies ? "replies held back (testing faults)" : "plain"));
  const JobConfig config = OneShardJob(2, held_replies);
  REQUIRE(ServersTakeSlices(config));
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();
  const std::vector<proto::PushRequest> rank0 =
      Slices(client.Gradient(0, 0, 1.0f, 0.01f), 4);
  const std::vector<proto::PushRequest> rank1 =
      Slices(client.Gradient(1, 0, 3.0f, 0.02f), 4);

  grpc::ClientContext c0, c1;
  auto stream0 = client.stub->StepStream(&c0);
  auto stream1 = client.stub->StepStream(&c1);
  ChunkBytes got0, got1;
  for (size_t i = 0; i < rank0.size(); ++i) {
    REQUIRE(stream0->Write(rank0[i]));
    REQUIRE(stream1->Write(rank1[i]));
    // Both ranks sent slice i, and nothing after it: its chunks come back
    // at version 1 now, the round not over until the last slice.
    proto::PullResponse part0, part1;
    REQUIRE(stream0->Read(&part0));
    REQUIRE(stream1->Read(&part1));
    CHECK(SameChunks(part0, rank0[i]));
    CHECK(SameChunks(part1, rank1[i]));
    CHECK(part0.version() == 1);
    testing::AddChunks(part0, &got0);
    testing::AddChunks(part1, &got1);
    if (i + 1 < rank0.size()) CHECK(client.Status().version() == 0);
  }
  const ChunkBytes expected = ByChunk(TwoRankRound(config));
  CHECK(got0.size() == chunks);
  CHECK(got0 == expected);
  CHECK(got1 == expected);
  CHECK(client.Status().version() == 1);
  CHECK(client.Status().pushes() == 2);
  for (Stream* s : {stream0.get(), stream1.get()}) testing::CloseStep(s);
}

TEST_CASE(
    "a worker cut off between slices leaves the chunks it sent in the "
    "round; its retry is a duplicate for them and applies the rest",
    "[integration][stepstream][slices][sync]") {
  const JobConfig config = OneShardJob(2);
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();
  const std::vector<proto::PushRequest> rank0 =
      Slices(client.Gradient(0, 0, 1.0f, 0.01f), 3);

  // Rank 1's whole push, in slices, is in; its reply waits for rank 0.
  grpc::ClientContext c1;
  auto stream1 = client.stub->StepStream(&c1);
  for (const auto& slice : Slices(client.Gradient(1, 0, 3.0f, 0.02f), 3)) {
    REQUIRE(stream1->Write(slice));
  }
  REQUIRE(client.shard.policy().TEST_AwaitWorker(1, 1, /*live=*/true,
                                                 absl::Seconds(30)));
  // Rank 0 sends its first slice, is answered it, and its connection
  // breaks: that slice stays in the round.
  {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    REQUIRE(stream->Write(rank0[0]));
    proto::PullResponse part;
    REQUIRE(stream->Read(&part));
    CHECK(SameChunks(part, rank0[0]));
    c.TryCancel();
    CHECK_FALSE(stream->Finish().ok());
  }
  CHECK(client.Status().version() == 0);
  CHECK(client.Status().pushes() == 1);  // Rank 1's; rank 0's is not whole.

  // The worker lives and sends the step again: the first slice is a
  // duplicate, the others complete the round — the same result as the
  // step sent once.
  grpc::ClientContext c0;
  auto stream0 = client.stub->StepStream(&c0);
  for (const auto& slice : rank0) REQUIRE(stream0->Write(slice));
  const ChunkBytes expected = ByChunk(TwoRankRound(config));
  CHECK(ReadReply(stream0.get(), chunks, 1) == expected);
  CHECK(ReadReply(stream1.get(), chunks, 1) == expected);
  CHECK(client.Status().version() == 1);
  CHECK(client.Status().pushes() == 2);
  for (Stream* s : {stream0.get(), stream1.get()}) testing::CloseStep(s);
}

TEST_CASE(
    "a push in slices that ends without all of the shard's chunks is "
    "refused, naming it; the chunks it sent are applied",
    "[integration][stepstream][slices][sync]") {
  const JobConfig config = OneShardJob(1);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  std::vector<proto::PushRequest> slices =
      Slices(client.Gradient(0, 0, 1.0f), 3);
  slices[1].set_more(false);  // Ends after two of three.
  grpc::ClientContext c;
  auto stream = client.stub->StepStream(&c);
  REQUIRE(stream->Write(slices[0]));
  REQUIRE(stream->Write(slices[1]));
  // The first slice's reply comes, then the call ends.
  proto::PullResponse part;
  while (stream->Read(&part)) CHECK(SameChunks(part, slices[0]));
  const grpc::Status s = stream->Finish();
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() ==
        "StepStream: the push of rank 0 at clock 0 ended without all of shard "
        "0's chunks; those sent are applied");
  CHECK(client.Status().pushes() == 0);
  // The round is open with them: the rest of the push completes it.
  grpc::ClientContext c2;
  auto again = client.stub->StepStream(&c2);
  for (const auto& slice : Slices(client.Gradient(0, 0, 1.0f), 3)) {
    REQUIRE(again->Write(slice));
  }
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();
  CHECK(ReadReply(again.get(), chunks, 1).size() == chunks);
  CHECK(client.Status().version() == 1);
  CHECK(client.Status().pushes() == 1);
  testing::CloseStep(again.get());
}

TEST_CASE(
    "a push in slices half-closed between its messages is refused, naming "
    "the chunks it leaves applied",
    "[integration][stepstream][slices][sync]") {
  const JobConfig config = OneShardJob(1);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  const std::vector<proto::PushRequest> slices =
      Slices(client.Gradient(0, 0, 1.0f), 3);
  grpc::ClientContext c;
  auto stream = client.stub->StepStream(&c);
  REQUIRE(stream->Write(slices[0]));
  stream->WritesDone();
  proto::PullResponse part;
  while (stream->Read(&part)) CHECK(SameChunks(part, slices[0]));
  const grpc::Status s = stream->Finish();
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message() ==
        absl::StrCat("StepStream: the stream ended after ",
                     slices[0].chunks_size(),
                     " chunks of a push in slices whose `more` said another "
                     "message follows; those chunks are applied"));
  CHECK(client.Status().version() == 0);
  CHECK(client.Status().pushes() == 0);
}

TEST_CASE(
    "where the shards take pushes whole, a step asking for slices is "
    "answered once whole",
    "[integration][stepstream][slices]") {
  // Clipping judges the whole push (a bound no gradient here reaches).
  JobConfig config = OneShardJob(2);
  config.optimizer.clip_norm = 1e30;
  REQUIRE_FALSE(ServersTakeSlices(config));
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  const size_t chunks = client.shard.plan().ChunksOfShard(0).size();
  grpc::ClientContext c0, c1;
  auto stream0 = client.stub->StepStream(&c0);
  auto stream1 = client.stub->StepStream(&c1);
  for (const auto& slice : Slices(client.Gradient(0, 0, 1.0f, 0.01f), 3)) {
    REQUIRE(stream0->Write(slice));
  }
  for (const auto& slice : Slices(client.Gradient(1, 0, 3.0f, 0.02f), 3)) {
    REQUIRE(stream1->Write(slice));
  }
  proto::PullResponse whole;
  REQUIRE(stream0->Read(&whole));
  CHECK(static_cast<size_t>(whole.chunks_size()) == chunks);
  CHECK(ByChunk(whole) == ByChunk(TwoRankRound(config)));
  CHECK(ReadReply(stream1.get(), chunks, 1) == ByChunk(whole));
  for (Stream* s : {stream0.get(), stream1.get()}) testing::CloseStep(s);
}

}  // namespace
}  // namespace paramd
