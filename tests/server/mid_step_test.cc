// A worker that dies between its pushes to two shards (a step is atomic
// per shard, not across shards; docs/architecture.md, "A worker dying
// mid-step"): its gradient stays applied on the shard its push reached and
// is not on the other; that shard's round goes on without it once it
// registers again (even when no other rank pushed there: the round is
// passed) or its lease expires; a step it sends again is a duplicate where
// it was applied and applied where it was not.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "common/base/clock.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::PullAt;
using testing::RegisterAtZero;
using testing::WholePush;

// Two shards of one sync job (SGD, learning rate 0.05, momentum 0.9: a
// first step moves each element by -0.05 × the mean gradient), every rank
// registered at clock 0, leases on a fake clock.
struct TwoShards {
  explicit TwoShards(int workers) {
    testing::JobOptions o;
    o.workers = workers;
    config = testing::MakeJob(o, testing::NewTempDir());
    for (int s = 0; s < 2; ++s) {
      auto shard = Shard::Create(config, s, &clock);
      REQUIRE(shard.ok());
      shards[s] = *std::move(shard);
      for (int r = 0; r < workers; ++r) {
        RegisterAtZero(*shards[s], config.job_id, r);
      }
      initial[s] = Values(s, 0);
    }
  }

  // `rank`'s push of `clock` to `shard`, every element `value`.
  absl::Status Push(int shard, uint32_t rank, uint64_t clock, float value,
                    bool* duplicate = nullptr) {
    proto::PushResponse response;
    absl::Status s = shards[shard]->Push(
        WholePush(*shards[shard], config.job_id, rank, clock, value),
        &response);
    if (duplicate != nullptr) *duplicate = response.duplicate();
    return s;
  }
  uint64_t Version(int shard) { return shards[shard]->store().version(); }

  // The shard's first chunk as a pull at `clock` by rank 0 gets it (it
  // must be readable).
  std::vector<float> Values(int shard, uint64_t clock) {
    proto::PullResponse pulled;
    const absl::Status s =
        testing::PullInto(*shards[shard], PullAt(config.job_id, 0, clock),
                          absl::InfiniteFuture(), nullptr, &pulled);
    INFO(s.message());
    REQUIRE(s.ok());
    const std::string& data = pulled.chunks(0).data();
    std::vector<float> out(data.size() / sizeof(float));
    std::memcpy(out.data(), data.data(), data.size());
    return out;
  }
  // Whether every element of the shard's first chunk moved by `delta`
  // since clock 0 (to float rounding).
  bool MovedBy(int shard, uint64_t clock, float delta) {
    const std::vector<float> now = Values(shard, clock);
    for (size_t i = 0; i < now.size(); ++i) {
      if (std::abs(now[i] - initial[shard][i] - delta) > 1e-6f) return false;
    }
    return true;
  }

  // Both phases of a registration on both shards, as a worker's client
  // does: each shard proposes, the largest proposal is joined everywhere.
  uint64_t Register(uint32_t rank) {
    uint64_t clock = 0;
    for (bool join : {false, true}) {
      for (auto& shard : shards) {
        proto::RegisterRequest r;
        r.set_job_id(config.job_id);
        r.set_rank(rank);
        r.set_plan_fingerprint(shard->plan().fingerprint());
        r.set_join(join);
        r.set_clock(clock);
        proto::RegisterResponse response;
        const absl::Status s = shard->Register(r, &response);
        INFO(s.message());
        REQUIRE(s.ok());
        if (!join) clock = std::max<uint64_t>(clock, response.clock());
      }
    }
    return clock;
  }

  FakeClock clock;
  JobConfig config;
  std::unique_ptr<Shard> shards[2];
  std::vector<float> initial[2];
};

TEST_CASE(
    "a worker dead between its pushes to two shards: its gradient counts "
    "where its push arrived, and the round of the other shard, which no one "
    "pushed, is passed when it registers again",
    "[integration][mid_step][sync]") {
  TwoShards job(1);
  REQUIRE(job.Push(0, 0, 0, 1.0f).ok());
  CHECK(job.Version(0) == 1);
  CHECK(job.Version(1) == 0);
  // A new process of rank 0: shard 0 proposes clock 1, shard 1 clock 0;
  // it joins at 1, and shard 1's round 0, which only rank 0 could have
  // pushed, is passed without a step.
  CHECK(job.Register(0) == 1);
  CHECK(job.Version(1) == 1);
  CHECK(job.MovedBy(0, 1, -0.05f));
  CHECK(job.MovedBy(1, 1, 0.0f));
  // Its next step goes on, on both shards.
  REQUIRE(job.Push(0, 0, 1, 1.0f).ok());
  REQUIRE(job.Push(1, 0, 1, 1.0f).ok());
  CHECK(job.Version(0) == 2);
  CHECK(job.Version(1) == 2);
}

TEST_CASE(
    "a worker dead between its pushes to two shards: the other shard's "
    "round closes without it when it registers again or its lease expires",
    "[integration][mid_step][sync]") {
  TwoShards job(2);
  REQUIRE(job.Push(0, 1, 0, 2.0f).ok());
  REQUIRE(job.Push(1, 1, 0, 2.0f).ok());
  REQUIRE(job.Push(0, 0, 0, 1.0f).ok());  // Rank 0 dies after this.
  CHECK(job.Version(0) == 1);
  CHECK(job.Version(1) == 0);  // Waits for rank 0.
  const bool registers = GENERATE(true, false);
  if (registers) {
    CHECK(job.Register(0) == 1);
  } else {
    job.clock.Advance(absl::Seconds(job.config.liveness.lease_seconds + 1));
    for (auto& shard : job.shards) shard->Tick();
  }
  CHECK(job.Version(1) == 1);
  CHECK(job.MovedBy(0, 1, -0.05f * 1.5f));  // Both gradients' mean.
  CHECK(job.MovedBy(1, 1, -0.05f * 2.0f));  // Rank 1's alone.
}

TEST_CASE(
    "a worker's step sent again after a break between its shards is a "
    "duplicate where it was applied and applied where it was not",
    "[integration][mid_step][sync]") {
  TwoShards job(2);
  REQUIRE(job.Push(0, 1, 0, 2.0f).ok());
  REQUIRE(job.Push(1, 1, 0, 2.0f).ok());
  REQUIRE(job.Push(0, 0, 0, 1.0f).ok());
  // The connection to shard 1 broke; the process lives and retries.
  bool duplicate = false;
  REQUIRE(job.Push(0, 0, 0, 1.0f, &duplicate).ok());
  CHECK(duplicate);
  REQUIRE(job.Push(1, 0, 0, 1.0f, &duplicate).ok());
  CHECK_FALSE(duplicate);
  CHECK(job.Version(0) == 1);
  CHECK(job.Version(1) == 1);
  CHECK(job.MovedBy(0, 1, -0.05f * 1.5f));
  CHECK(job.MovedBy(1, 1, -0.05f * 1.5f));
}

TEST_CASE(
    "a round nobody live takes part in stays while no rank is live: a "
    "lone worker dead mid-step that never comes back moves no version",
    "[integration][mid_step][sync]") {
  TwoShards job(1);
  REQUIRE(job.Push(0, 0, 0, 1.0f).ok());
  job.clock.Advance(absl::Seconds(job.config.liveness.lease_seconds + 1));
  for (auto& shard : job.shards) shard->Tick();
  CHECK(job.Version(0) == 1);
  CHECK(job.Version(1) == 0);
  // Back later, it continues where shard 0 is.
  CHECK(job.Register(0) == 1);
  CHECK(job.Version(1) == 1);
}

}  // namespace
}  // namespace paramd
