// worker.overlap over real loopback gRPC: each step's push leaves piece by
// piece during the backward pass (a StepStream step whose pieces follow one
// another as the chunks become final) and the next parameters come back a
// chunk per message (reply_message_bytes = 1) while the next forward pass
// runs on them.
#include <grpcpp/create_channel.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "common/model/partitioner.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/cluster_training.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "worker/trainer.h"

namespace paramd {
namespace {

using testing::CheckLossFalls;
using testing::JobOptions;
using testing::LocalCluster;
using testing::Observed;
using testing::TrainAll;

JobConfig OverlapJob(JobOptions o) {
  JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  config.worker.overlap = true;
  return config;
}

TEST_CASE(
    "overlapped steps over gRPC: lock-step, both workers see every version "
    "alike, the loss falls, close to the plain run",
    "[overlap][integration][sync]") {
  JobOptions o;
  o.epochs = 3;
  o.train_limit = 3072;
  const JobConfig config = OverlapJob(o);
  // 784 × 64 weights in chunks of 4096 floats: 13 pieces of 64 rows each
  // way, on both shards.
  REQUIRE(config.chunk_bytes == 16384);
  LocalCluster cluster(config);
  Observed observed;
  const auto trainers = TrainAll(config, cluster, observed);
  const uint64_t steps = 3 * 48;
  REQUIRE(observed.seen[0].size() == steps + 1);  // versions 0 … 144
  CHECK(observed.seen[0] == observed.seen[1]);
  CHECK(trainers[0]->params() == trainers[1]->params());
  CheckLossFalls(observed, 2, steps);
  for (int s = 0; s < 2; ++s) {
    proto::ShardStatus st;
    cluster.server(s).shard()->GetStatus(&st);
    CHECK(st.version() == steps);
    for (const auto& w : st.workers()) {
      CHECK(w.pushes() == steps);
      CHECK(w.state() == "finished");
    }
  }

  // The same job without overlap: the same updates but for rounding (the
  // overlapped forward pass adds a layer's products piece by piece).
  JobConfig plain = config;
  plain.worker.overlap = false;
  LocalCluster plain_cluster(plain);
  Observed plain_observed;
  const std::vector<float> expected =
      TrainAll(plain, plain_cluster, plain_observed)[0]->params();
  // And as many pulls: an epoch's evaluation reads the parameters its last
  // exchange brought, without a pull of its own.
  for (int s = 0; s < 2; ++s) {
    proto::ShardStatus overlapped, unoverlapped;
    cluster.server(s).shard()->GetStatus(&overlapped);
    plain_cluster.server(s).shard()->GetStatus(&unoverlapped);
    for (int r = 0; r < 2; ++r) {
      INFO("shard " << s << " rank " << r);
      CHECK(overlapped.workers(r).pulls() == unoverlapped.workers(r).pulls());
    }
  }
  const std::vector<float>& got = trainers[0]->params();
  REQUIRE(got.size() == expected.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(double{got[i]} - expected[i]));
  }
  INFO("largest difference from the plain run: " << worst);
  CHECK(worst < 1e-4);
}

TEST_CASE(
    "overlapped exchanges whose replies are dropped are done again, exactly "
    "once: the parameters of an undisturbed overlapped run, bit for bit",
    "[overlap][integration][exactly-once]") {
  JobOptions o;
  o.epochs = 1;
  o.train_limit = 1024;
  o.test_limit = 256;
  testing::CheckDroppedRepliesChangeNothing(OverlapJob(o), 1024 / 2 / 32);
}

TEST_CASE("overlapped float16 both ways: lock-step at half the bytes",
          "[overlap][integration][fp16]") {
  JobOptions o;
  o.epochs = 1;
  o.train_limit = 3072;
  testing::CheckFloat16HalvesTheBytes(OverlapJob(o), 48);
}

TEST_CASE("overlapped steps under async lose no push and learn",
          "[overlap][integration][async]") {
  JobOptions o;
  o.policy = "async";
  o.learning_rate = 0.025;
  o.epochs = 3;
  o.train_limit = 3072;
  const JobConfig config = OverlapJob(o);
  LocalCluster cluster(config);
  Observed observed;
  TrainAll(config, cluster, observed);
  const uint64_t steps = 3 * 48;
  testing::CheckEveryPushApplied(cluster, config, steps);
  CheckLossFalls(observed, 2, steps);
}

TEST_CASE(
    "PullStream's stream_message_bytes: 1 sends a chunk per message, unset "
    "groups a megabyte, and the chunks are those of Pull either way",
    "[overlap][integration][stream]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  LocalCluster cluster(config);
  const PartitionPlan& plan = cluster.server(0).shard()->plan();
  auto stub = proto::ParameterService::NewStub(grpc::CreateChannel(
      cluster.addresses()[0], grpc::InsecureChannelCredentials()));
  testing::RegisterOverGrpc(*stub, config, plan, 0);
  proto::PullRequest req;
  req.set_job_id(config.job_id);
  req.set_rank(0);
  req.set_clock(0);
  proto::PullResponse whole;
  {
    grpc::ClientContext c;
    REQUIRE(stub->Pull(&c, req, &whole).ok());
  }
  REQUIRE(whole.chunks_size() == static_cast<int>(plan.chunks().size()));
  REQUIRE(plan.chunks().size() > 2);
  // (message bytes asked, messages expected): two full chunks per message
  // make groups as GroupChunks closes them (the small last chunks of the
  // tensors ride together).
  std::vector<int64_t> bytes;
  for (const ChunkSpec& c : plan.chunks()) bytes.push_back(c.length * 4);
  const int64_t two = 2 * bytes[0];
  const int pairs = static_cast<int>(GroupChunks(bytes, two).size());
  CHECK(pairs > 1);
  CHECK(pairs < whole.chunks_size());
  for (const auto& [asked, messages] : std::vector<std::pair<uint32_t, int>>{
           {1, whole.chunks_size()},
           {0, 1},
           {static_cast<uint32_t>(two), pairs}}) {
    req.set_stream_message_bytes(asked);
    grpc::ClientContext c;
    auto reader = stub->PullStream(&c, req);
    proto::PullResponse part, joined;
    int count = 0;
    while (reader->Read(&part)) {
      ++count;
      CHECK(part.version() == 0);
      for (const auto& chunk : part.chunks()) *joined.add_chunks() = chunk;
    }
    REQUIRE(reader->Finish().ok());
    INFO("stream_message_bytes " << asked);
    CHECK(count == messages);
    CHECK(joined.SerializeAsString() == whole.SerializeAsString());
  }
}

}  // namespace
}  // namespace paramd
