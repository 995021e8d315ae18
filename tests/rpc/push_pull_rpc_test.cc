// The PushPull RPC through a plain protobuf client over real gRPC: the push
// applies exactly once, the next clock's parameters come back (as float16
// when asked), a refused push pulls nothing, and under sync the call waits
// for the round like a pull; StepStream does the same step after step on
// one stream.
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "common/base/half.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/shard_client.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::LocalCluster;

JobConfig OneShardJob(int workers) {
  return testing::OneShardJob(workers, /*held_replies=*/false, "[20, 10]");
}

using Client = testing::ShardClient;

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

TEST_CASE(
    "PushPull applies the push once and returns the next clock's "
    "parameters",
    "[integration][pushpull]") {
  const JobConfig config = OneShardJob(1);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  const proto::PullResponse before = client.Pull(0, 0);

  // All ones: the first SGD step moves every parameter by -lr.
  const proto::PushRequest push = client.Gradient(0, 0, 1.0f);
  proto::PullResponse after;
  grpc::Status s = client.PushPull(push, &after);
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(after.version() == 1);
  REQUIRE(after.chunks_size() == before.chunks_size());
  const float lr = static_cast<float>(config.optimizer.learning_rate);
  for (int k = 0; k < after.chunks_size(); ++k) {
    CHECK(after.chunks(k).dtype() == proto::DTYPE_FLOAT32);
    const std::vector<float> b = Floats(before.chunks(k).data());
    const std::vector<float> a = Floats(after.chunks(k).data());
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i] == Approx(b[i] - lr).margin(1e-6));
    }
  }

  // The same call again (a retry after a lost reply): not applied twice,
  // the same parameters back.
  proto::PullResponse again;
  REQUIRE(client.PushPull(push, &again).ok());
  CHECK(again.SerializeAsString() == after.SerializeAsString());
  proto::ShardStatus st = client.Status();
  CHECK(st.version() == 1);
  CHECK(st.pushes() == 1);

  // Asking for float16: the halves of the next version.
  proto::PushRequest next = client.Gradient(0, 1, 0.5f);
  next.set_pull_dtype(proto::DTYPE_FLOAT16);
  proto::PullResponse halves;
  REQUIRE(client.PushPull(next, &halves).ok());
  CHECK(halves.version() == 2);
  const proto::PullResponse wide = client.Pull(0, 2);
  REQUIRE(halves.chunks_size() == wide.chunks_size());
  for (int k = 0; k < halves.chunks_size(); ++k) {
    CHECK(halves.chunks(k).dtype() == proto::DTYPE_FLOAT16);
    const std::vector<float> w = Floats(wide.chunks(k).data());
    const std::string& h = halves.chunks(k).data();
    REQUIRE(h.size() == w.size() * 2);
    for (size_t i = 0; i < w.size(); ++i) {
      uint16_t half;
      std::memcpy(&half, h.data() + 2 * i, 2);
      REQUIRE(half == FloatToHalf(w[i]));
    }
  }
}

TEST_CASE("a refused PushPull applies and pulls nothing",
          "[integration][pushpull]") {
  const JobConfig config = OneShardJob(1);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);
  proto::PushRequest bad = client.Gradient(0, 0, 1.0f);
  bad.mutable_chunks(0)->mutable_data()->resize(4);
  proto::PullResponse out;
  grpc::Status s = client.PushPull(bad, &out);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(s.error_message(), Catch::StartsWith("Push: chunk"));
  proto::PushRequest bad_dtype = client.Gradient(0, 0, 1.0f);
  bad_dtype.set_pull_dtype(static_cast<proto::DType>(7));
  s = client.PushPull(bad_dtype, &out);
  // The push went through; the pull refused the dtype, naming it.
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(s.error_message(), Catch::StartsWith("Pull: dtype 7"));
  const proto::ShardStatus st = client.Status();
  CHECK(st.version() == 1);
  CHECK(st.pushes() == 1);
  CHECK(st.pulls() == 0);
}

TEST_CASE("under sync a PushPull waits for the round, as a pull does",
          "[integration][pushpull][sync]") {
  const JobConfig config = OneShardJob(2);
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  proto::PullResponse first;
  grpc::Status first_status;
  std::thread rank0([&] {
    first_status = client.PushPull(client.Gradient(0, 0, 1.0f), &first);
  });
  // Rank 0's push is in; its pull waits for rank 1.
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(1, absl::Seconds(30)));
  CHECK(client.Status().version() == 0);
  proto::PullResponse second;
  REQUIRE(client.PushPull(client.Gradient(1, 0, 3.0f), &second).ok());
  rank0.join();
  INFO(first_status.error_message());
  REQUIRE(first_status.ok());
  CHECK(first.version() == 1);
  CHECK(first.SerializeAsString() == second.SerializeAsString());
}

TEST_CASE(
    "a unary Pull or PushPull whose caller cancels while it waits ends "
    "CANCELLED, and the shard forgets it; the round still completes",
    "[integration][pushpull][sync]") {
  const JobConfig config = OneShardJob(2);
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  // Rank 0's PushPull: its push is in, its pull waits for rank 1's push.
  grpc::ClientContext push_pull;
  grpc::Status push_pull_status;
  std::thread rank0([&] {
    proto::PullResponse unused;
    push_pull_status =
        client.stub->PushPull(&push_pull, client.Gradient(0, 0, 1.0f), &unused);
  });
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(1, absl::Seconds(30)));
  // Rank 1 pulls version 1 too, without a deadline.
  grpc::ClientContext pull;
  grpc::Status pull_status;
  std::thread rank1([&] {
    proto::PullResponse unused;
    pull_status = client.stub->Pull(&pull, client.PullAt(1, 1), &unused);
  });
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(2, absl::Seconds(30)));
  pull.TryCancel();
  push_pull.TryCancel();
  rank1.join();
  rank0.join();
  CHECK(pull_status.error_code() == grpc::StatusCode::CANCELLED);
  CHECK(push_pull_status.error_code() == grpc::StatusCode::CANCELLED);
  // Both waits end on the server (nothing else would end them: no
  // deadline, no push), and their slots are free again.
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(0, absl::Seconds(30)));
  CHECK(client.Status().waiting_size() == 0);
  // Rank 0's push was applied before the cancel: rank 1 completes the
  // round.
  proto::PullResponse second;
  REQUIRE(client.PushPull(client.Gradient(1, 0, 3.0f), &second).ok());
  CHECK(second.version() == 1);
}

TEST_CASE(
    "StepStream answers each step as PushPull does, in order, on one open "
    "stream; a refused step ends it and nothing of it is applied",
    "[integration][pushpull][stepstream]") {
  const JobConfig config = OneShardJob(1);
  LocalCluster cluster(config);
  Client client(config, cluster);
  client.Register(0);

  // The same two steps as unary PushPulls on a second shard of the same
  // job give the parameters to expect.
  LocalCluster twin(config);
  Client reference(config, twin);
  reference.Register(0);
  std::vector<proto::PullResponse> expected(2);
  REQUIRE(
      reference.PushPull(reference.Gradient(0, 0, 1.0f), &expected[0]).ok());
  REQUIRE(
      reference.PushPull(reference.Gradient(0, 1, 0.5f), &expected[1]).ok());

  {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    for (uint64_t clock = 0; clock < 2; ++clock) {
      REQUIRE(stream->Write(client.Gradient(0, clock, clock == 0 ? 1 : 0.5f)));
      proto::PullResponse reply;
      REQUIRE(stream->Read(&reply));
      CHECK(reply.version() == clock + 1);
      CHECK(reply.SerializeAsString() == expected[clock].SerializeAsString());
    }
    // A retry of step 1 on the same stream (its reply thought lost): a
    // duplicate, the same parameters back.
    REQUIRE(stream->Write(client.Gradient(0, 1, 0.5f)));
    proto::PullResponse again;
    REQUIRE(stream->Read(&again));
    CHECK(again.SerializeAsString() == expected[1].SerializeAsString());
    testing::CloseStep(stream.get());
  }
  CHECK(client.Status().version() == 2);
  CHECK(client.Status().pushes() == 2);

  // A bad step ends the stream with its error; the next stream goes on.
  {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    proto::PushRequest bad = client.Gradient(0, 2, 1.0f);
    bad.mutable_chunks(0)->mutable_data()->resize(4);
    REQUIRE(stream->Write(bad));
    proto::PullResponse none;
    CHECK_FALSE(stream->Read(&none));
    const grpc::Status s = stream->Finish();
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(),
               Catch::StartsWith("StepStream message 1: Push: chunk"));
  }
  CHECK(client.Status().version() == 2);
  grpc::ClientContext c;
  auto stream = client.stub->StepStream(&c);
  REQUIRE(stream->Write(client.Gradient(0, 2, 1.0f)));
  proto::PullResponse third;
  REQUIRE(stream->Read(&third));
  CHECK(third.version() == 3);
  testing::CloseStep(stream.get());
}

TEST_CASE(
    "under sync, StepStream pulls wait in the shard without a thread and are "
    "answered by the round's last push, on every stream",
    "[integration][pushpull][stepstream][sync]") {
  constexpr uint32_t kWorkers = 6;
  const JobConfig config = OneShardJob(kWorkers);
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank = 0; rank < kWorkers; ++rank) client.Register(rank);
  // Ranks 1..5 step on streams of their own; their pulls all wait.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<
      grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>>>
      streams;
  for (uint32_t rank = 1; rank < kWorkers; ++rank) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(client.stub->StepStream(contexts.back().get()));
    REQUIRE(streams.back()->Write(client.Gradient(rank, 0, 1.0f)));
  }
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(kWorkers - 1, absl::Seconds(30)));
  CHECK(client.Status().version() == 0);
  // Rank 0's step completes the round: every stream gets version 1.
  proto::PullResponse mine;
  REQUIRE(client.PushPull(client.Gradient(0, 0, 1.0f), &mine).ok());
  CHECK(mine.version() == 1);
  for (auto& stream : streams) {
    proto::PullResponse reply;
    REQUIRE(stream->Read(&reply));
    CHECK(reply.SerializeAsString() == mine.SerializeAsString());
    testing::CloseStep(stream.get());
  }
  CHECK(client.shard.TEST_AwaitWaitingPulls(0, absl::Seconds(30)));
}

TEST_CASE(
    "a StepStream cancelled while its pull waits ends, and the shard forgets "
    "the pull; the round still completes",
    "[integration][pushpull][stepstream][sync]") {
  const JobConfig config = OneShardJob(2);
  LocalCluster cluster(config);
  Client client(config, cluster);
  for (uint32_t rank : {0u, 1u}) client.Register(rank);
  {
    grpc::ClientContext c;
    auto stream = client.stub->StepStream(&c);
    REQUIRE(stream->Write(client.Gradient(0, 0, 1.0f)));
    REQUIRE(client.shard.TEST_AwaitWaitingPulls(1, absl::Seconds(30)));
    c.TryCancel();
    proto::PullResponse none;
    CHECK_FALSE(stream->Read(&none));
    CHECK(stream->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  // The waiting pull is gone from the status (and its in-flight count).
  REQUIRE(client.shard.TEST_AwaitWaitingPulls(0, absl::Seconds(30)));
  CHECK(client.Status().waiting_size() == 0);
  // Rank 0's push was applied before the cancel: rank 1 completes the round,
  // and rank 0's retry of clock 0 is a duplicate with version 1 back.
  proto::PullResponse second, retry;
  REQUIRE(client.PushPull(client.Gradient(1, 0, 3.0f), &second).ok());
  CHECK(second.version() == 1);
  REQUIRE(client.PushPull(client.Gradient(0, 0, 1.0f), &retry).ok());
  CHECK(retry.SerializeAsString() == second.SerializeAsString());
  CHECK(client.Status().pushes() == 2);
}

}  // namespace
}  // namespace paramd
