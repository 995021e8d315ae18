// replication.factor 2 over loopback gRPC: every shard on a primary and a
// backup server; a primary stopped at a random step is taken over by its
// backup without a restart, and the job ends where an undisturbed run
// ends — under sync on the same parameters bit for bit, under async and
// ssp with every push applied exactly once.
#include <atomic>
#include <catch2/catch.hpp>
#include <random>

#include "proto/paramd.pb.h"
#include "tests/cluster_training.h"
#include "tests/local_cluster.h"
#include "tests/replica_cluster.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::ReplicaCluster;

JobConfig SmallJob(const std::string& policy) {
  JobOptions o;
  o.epochs = 1;
  o.train_limit = 1024;
  o.test_limit = 256;
  o.policy = policy;
  // The backup takes over after a lease of silence: short, with
  // heartbeats well inside it.
  o.lease_seconds = 3;
  o.heartbeat_seconds = 0.25;
  return testing::MakeJob(o, testing::NewTempDir());
}

constexpr uint64_t kSteps = 1024 / 2 / 32;  // One epoch of each rank.

proto::ShardStatus StatusOf(ParameterServer& server) {
  proto::ShardStatus status;
  server.shard()->GetStatus(&status);
  return status;
}

// Trains `config` replicated, stopping shard `shard`'s primary once rank 0
// has taken `at` steps; returns the trainers' final parameters.
std::vector<std::vector<float>> TrainStopping(const JobConfig& config,
                                              ReplicaCluster& cluster,
                                              int shard, uint64_t at) {
  std::atomic<bool> stopped{false};
  const auto trainers = cluster.TrainAll([&](int rank, uint64_t clock) {
    if (rank == 0 && clock + 1 == at && !stopped.exchange(true)) {
      cluster.StopPrimary(shard);
    }
  });
  REQUIRE(stopped.load());
  std::vector<std::vector<float>> params;
  for (const auto& t : trainers) params.push_back(t->params());
  return params;
}

TEST_CASE(
    "sync: a primary stopped at a random step is taken over by its backup "
    "and the job ends on the undisturbed run's parameters bit for bit",
    "[replication][sync][integration]") {
  const JobConfig plain = SmallJob("sync");
  std::vector<float> expected;
  {
    testing::LocalCluster cluster(plain);
    testing::Observed observed;
    expected = testing::TrainAll(plain, cluster, observed)[0]->params();
  }
  const JobConfig config = testing::WithReplicas(plain);
  std::mt19937 random(std::random_device{}());
  const int shard = static_cast<int>(random() % 2);
  const uint64_t at = 3 + random() % (kSteps - 6);
  INFO("stopping shard " << shard << "'s primary at step " << at);
  ReplicaCluster cluster(config);
  const auto params = TrainStopping(config, cluster, shard, at);
  for (const auto& p : params) CHECK(p == expected);

  const proto::ShardStatus taken = StatusOf(cluster.backup(shard));
  CHECK(taken.replica().role() == "primary");
  CHECK(taken.replica().takeovers() == 1);
  CHECK(taken.replica().term() == 2);
  CHECK(taken.version() == kSteps);
  // The other shard's primary kept its backup in sync throughout.
  const proto::ShardStatus other = StatusOf(cluster.primary(1 - shard));
  CHECK(other.replica().role() == "primary");
  CHECK(other.replica().peer_in_sync());
  CHECK(other.version() == kSteps);
  CHECK(StatusOf(cluster.backup(1 - shard)).replica().held_version() == kSteps);
}

TEST_CASE("async and ssp: after a take-over every push is applied exactly once",
          "[replication][async][ssp][integration]") {
  const std::string policy = GENERATE("async", "ssp");
  const JobConfig config = testing::WithReplicas(SmallJob(policy));
  std::mt19937 random(std::random_device{}());
  const uint64_t at = 3 + random() % (kSteps - 6);
  INFO(policy << ": stopping shard 0's primary at step " << at);
  ReplicaCluster cluster(config);
  TrainStopping(config, cluster, 0, at);
  for (ParameterServer* server : {&cluster.backup(0), &cluster.primary(1)}) {
    const proto::ShardStatus st = StatusOf(*server);
    CHECK(st.replica().role() == "primary");
    // Two ranks' pushes, each applied once across the switch.
    CHECK(st.version() == 2 * kSteps);
    for (const auto& w : st.workers()) CHECK(w.clock() == kSteps);
  }
}

}  // namespace
}  // namespace paramd
