// A worker process SIGKILLed mid-training, under each policy: the job
// completes (nothing hangs), the servers show it dead; restarted with the
// same rank, it registers again as a second incarnation and finishes.
//
// Servers run in this process over loopback gRPC; workers are real
// paramd-worker processes. Every wait is a condition wait with a deadline.
#include <signal.h>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/local_cluster.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::Subprocess;

constexpr absl::Duration kTimeout = absl::Seconds(60);

std::unique_ptr<Subprocess> StartWorker(
    const JobConfig& config, int rank,
    const std::vector<std::string>& servers) {
  return std::make_unique<Subprocess>(std::vector<std::string>{
      "worker/paramd-worker", "--job", config.path, "--rank",
      absl::StrCat(rank), "--servers", absl::StrJoin(servers, ",")});
}

proto::WorkerStatus StatusOf(testing::LocalCluster& cluster, int rank) {
  proto::ShardStatus st;
  cluster.server(0).shard()->GetStatus(&st);
  return st.workers(rank);
}

// Every shard's view: versions, worker states and clocks, waiting pulls.
std::string Describe(testing::LocalCluster& cluster, int shards) {
  std::string out;
  for (int k = 0; k < shards; ++k) {
    proto::ShardStatus st;
    cluster.server(k).shard()->GetStatus(&st);
    absl::StrAppend(&out, "shard ", k, ": version ", st.version(), "\n");
    for (const auto& w : st.workers()) {
      absl::StrAppend(&out, "  rank ", w.rank(), " ", w.state(), " clock ",
                      w.clock(), " seen ", w.last_seen_seconds_ago(),
                      "s ago\n");
    }
    for (const auto& p : st.waiting()) {
      absl::StrAppend(&out, "  pull of rank ", p.rank(), " at ", p.clock(),
                      " waits for ", p.waiting_on(), "\n");
    }
  }
  return out;
}

void KillAndMaybeRestart(const std::string& policy, bool restart) {
  testing::JobOptions o;
  o.policy = policy;
  o.staleness = 2;
  o.epochs = 2;
  o.train_limit = 16000;  // 250 steps per epoch per worker
  o.test_limit = 500;
  o.lease_seconds = 1;
  o.heartbeat_seconds = 0.2;
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  testing::LocalCluster cluster(config);
  UpdatePolicy& p0 = cluster.server(0).shard()->policy();

  auto w0 = StartWorker(config, 0, cluster.addresses());
  auto w1 = StartWorker(config, 1, cluster.addresses());
  // Mid-training: rank 1 has pushed 50 steps.
  REQUIRE(p0.TEST_AwaitWorker(1, 50, /*live=*/true, kTimeout));
  w1->Signal(SIGKILL);
  CHECK(w1->Wait(kTimeout) == 128 + SIGKILL);
  // Its lease expires: the servers drop it and say so.
  REQUIRE(p0.TEST_AwaitWorker(1, 0, /*live=*/false, kTimeout));
  CHECK(StatusOf(cluster, 1).state() == "dead");

  if (restart) {
    // Whether the restarted worker is ever seen live depends on the race
    // with the survivor: under sync the survivor may finish the job first,
    // and the newcomer joins at the last clock and finishes at once. What
    // holds either way: a second incarnation registered and finished every
    // step.
    auto again = StartWorker(config, 1, cluster.addresses());
    const int code = again->Wait(kTimeout);
    INFO(again->output());
    INFO(Describe(cluster, 2));
    CHECK(code == 0);
    const proto::WorkerStatus rejoined = StatusOf(cluster, 1);
    CHECK(rejoined.state() == "finished");
    CHECK(rejoined.registrations() == 2);
    CHECK(rejoined.clock() == 2 * 250);
  }
  // The job completes: the surviving worker finishes every step.
  const int code = w0->Wait(kTimeout);
  INFO(w0->output());
  INFO(Describe(cluster, 2));
  CHECK(code == 0);
  CHECK(w0->output().find("rank 0: finished 2 epochs") != std::string::npos);
  const proto::WorkerStatus survivor = StatusOf(cluster, 0);
  CHECK(survivor.state() == "finished");
  CHECK(survivor.clock() == 2 * 250);
  if (!restart) CHECK(StatusOf(cluster, 1).state() == "dead");
}

TEST_CASE("sync: a killed worker does not hang the job",
          "[liveness][e2e][sync]") {
  SECTION("it stays dead") { KillAndMaybeRestart("sync", false); }
  SECTION("it is restarted and rejoins") { KillAndMaybeRestart("sync", true); }
}

TEST_CASE("ssp: a killed worker does not hang the job",
          "[liveness][e2e][ssp]") {
  SECTION("it stays dead") { KillAndMaybeRestart("ssp", false); }
  SECTION("it is restarted and rejoins") { KillAndMaybeRestart("ssp", true); }
}

TEST_CASE("async: a killed worker does not hang the job",
          "[liveness][e2e][async]") {
  SECTION("it stays dead") { KillAndMaybeRestart("async", false); }
  SECTION("it is restarted and rejoins") { KillAndMaybeRestart("async", true); }
}

}  // namespace
}  // namespace paramd
