// A shard's checkpoints (ShardCheckpoints through Shard): restored at start
// with retries recognised, an older one caught up, another job's or
// policy's refused.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "common/base/half.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;

// A shard of a 2-worker job with checkpoints every 2 versions in a new
// folder; Restart builds a new one from the same folder, as a restarted
// process does.
struct CheckpointFixture {
  explicit CheckpointFixture(const std::string& policy) {
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.layers = "[784, 8, 10]";
    o.policy = policy;
    o.staleness = 1;
    config = testing::MakeJob(o, testing::NewTempDir());
    config.checkpoint.dir = testing::NewTempDir() + "/checkpoints";
    config.checkpoint.every_steps = 2;
    Restart();
  }
  void Restart() {
    shard.reset();
    auto created = Shard::Create(config, 0);
    INFO(created.status().ToString());
    REQUIRE(created.ok());
    shard = *std::move(created);
  }
  // Both phases; returns the clock joined at.
  uint64_t Register(uint32_t rank) {
    proto::RegisterRequest req;
    req.set_job_id(config.job_id);
    req.set_rank(rank);
    req.set_plan_fingerprint(shard->plan().fingerprint());
    proto::RegisterResponse resp;
    REQUIRE(shard->Register(req, &resp).ok());
    req.set_join(true);
    req.set_clock(resp.clock());
    REQUIRE(shard->Register(req, &resp).ok());
    return resp.clock();
  }
  absl::Status Push(uint32_t rank, uint64_t clock, bool* duplicate = nullptr) {
    proto::PushResponse resp;
    absl::Status s = shard->Push(
        testing::WholePush(*shard, config.job_id, rank, clock, 0.5f + rank),
        &resp);
    if (duplicate != nullptr) *duplicate = resp.duplicate();
    return s;
  }
  proto::ShardStatus Status() {
    proto::ShardStatus st;
    shard->GetStatus(&st);
    return st;
  }
  std::vector<float> Params() {
    std::vector<float> out;
    shard->store().Read([&](uint64_t, absl::Span<const std::vector<float>> c) {
      for (const auto& chunk : c)
        out.insert(out.end(), chunk.begin(), chunk.end());
    });
    return out;
  }
  JobConfig config;
  std::unique_ptr<Shard> shard;
};

TEST_CASE(
    "a restarted shard restores its newest checkpoint; retries of pushes it "
    "holds are acknowledged, pushes after it are applied again",
    "[shard][checkpoint][exactly-once]") {
  CheckpointFixture f("sync");
  CHECK(f.Status().restored_from().empty());
  f.Register(0);
  f.Register(1);
  for (uint64_t clock : {0, 1}) {
    REQUIRE(f.Push(0, clock).ok());
    REQUIRE(f.Push(1, clock).ok());
  }
  proto::ShardStatus st = f.Status();
  REQUIRE(st.version() == 2);
  CHECK(st.checkpoint_version() == 2);  // Written as version 2 was reached.
  CHECK_THAT(st.checkpoint_path(),
             Catch::EndsWith("/shard-0-v00000000000000000002.ckpt"));
  const std::vector<float> at_2 = f.Params();
  REQUIRE(f.Push(0, 2).ok());  // Round 2 is open when the process dies.

  f.Restart();
  st = f.Status();
  CHECK(st.version() == 2);
  CHECK(st.restored_from() == st.checkpoint_path());
  CHECK(f.Params() == at_2);
  // The restarted process knows no registration.
  CHECK(absl::IsAborted(f.Push(1, 1)));
  CHECK(f.Register(0) == 2);
  CHECK(f.Register(1) == 2);
  // Rank 1's push of clock 1 is in the checkpoint: a retry is acknowledged.
  bool duplicate = false;
  REQUIRE(f.Push(1, 1, &duplicate).ok());
  CHECK(duplicate);
  CHECK(f.Params() == at_2);
  // Rank 0's push of clock 2 came after it: sent again, it is applied.
  REQUIRE(f.Push(0, 2, &duplicate).ok());
  CHECK_FALSE(duplicate);
  REQUIRE(f.Push(1, 2, &duplicate).ok());
  CHECK_FALSE(duplicate);
  CHECK(f.Status().version() == 3);
}

TEST_CASE(
    "a shard restored from an older checkpoint catches up with the job's "
    "clock when workers register",
    "[shard][checkpoint]") {
  for (const char* policy : {"sync", "async", "ssp"}) {
    SECTION(policy) {
      CheckpointFixture f(policy);
      f.Register(0);
      f.Register(1);
      for (uint64_t clock : {0, 1}) {
        REQUIRE(f.Push(0, clock).ok());
        REQUIRE(f.Push(1, clock).ok());
      }
      REQUIRE(f.Status().checkpoint_version() >= 2);
      f.Restart();
      // The other shards went on to clock 7 meanwhile: the workers join
      // there (their two-phase registration takes the largest proposal).
      for (uint32_t rank : {0u, 1u}) {
        for (bool join : {false, true}) {
          proto::RegisterRequest req;
          req.set_job_id(f.config.job_id);
          req.set_rank(rank);
          req.set_plan_fingerprint(f.shard->plan().fingerprint());
          req.set_join(join);
          req.set_clock(join ? 7 : 0);
          proto::RegisterResponse resp;
          const absl::Status s = f.shard->Register(req, &resp);
          INFO(s.ToString());
          REQUIRE(s.ok());
        }
      }
      REQUIRE(f.Push(0, 7).ok());
      REQUIRE(f.Push(1, 7).ok());
      if (std::string(policy) == "sync") CHECK(f.Status().version() == 8);
      // Once pushes flow, a clock beyond the slack is refused again.
      proto::RegisterRequest req;
      req.set_job_id(f.config.job_id);
      req.set_rank(0);
      req.set_plan_fingerprint(f.shard->plan().fingerprint());
      req.set_join(true);
      req.set_clock(100);
      proto::RegisterResponse resp;
      CHECK(absl::IsInvalidArgument(f.shard->Register(req, &resp)));
    }
  }
}

TEST_CASE("a checkpoint of another policy or job is refused at start",
          "[shard][checkpoint]") {
  CheckpointFixture f("sync");
  f.Register(0);
  f.Register(1);
  REQUIRE(f.shard->CheckpointNow().ok());
  f.shard.reset();
  JobConfig other = f.config;
  other.policy.type = PolicyType::kAsync;
  auto s = Shard::Create(other, 0);
  CHECK(absl::IsFailedPrecondition(s.status()));
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("was written under policy sync; the job's "
                             "policy is async"));
  other = f.config;
  other.job_id = "another-job";
  s = Shard::Create(other, 0);
  CHECK(absl::IsFailedPrecondition(s.status()));
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("is of job '" + f.config.job_id + "'"));
  // --fresh discards them.
  s = Shard::Create(other, 0, nullptr, ShardOptions{nullptr, true});
  REQUIRE(s.ok());
  CHECK((*s)->store().version() == 0);
}

}  // namespace
}  // namespace paramd
