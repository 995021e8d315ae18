// The gradient guards through a real Shard, without sockets: pushes above
// optimizer.clip_norm are applied scaled to it, and the divergence watch
// (the `guard` section) names, counts and — with on_diverge: skip_push —
// leaves out or — with stop — refuses what diverges.
#include "server/guards/gradient_guard.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

struct GuardFixture {
  explicit GuardFixture(const std::string& policy,
                        const std::function<void(JobConfig&)>& adjust) {
    testing::JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.layers = "[784, 16, 10]";
    o.policy = policy;
    o.momentum = 0;  // plain SGD: a step is -lr * gradient
    config = testing::MakeJob(o, testing::NewTempDir());
    adjust(config);
    shard = *Shard::Create(config, 0);
    for (uint32_t rank : {0u, 1u}) {
      testing::RegisterAtZero(*shard, config.job_id, rank);
    }
  }

  absl::Status Push(uint32_t rank, uint64_t clock, float value, float loss) {
    proto::PushRequest r =
        testing::WholePush(*shard, config.job_id, rank, clock, value);
    r.set_loss(loss);
    proto::PushResponse resp;
    return shard->Push(r, &resp);
  }

  std::vector<float> Params() {
    std::vector<float> all;
    shard->store().Read([&](uint64_t, absl::Span<const std::vector<float>> c) {
      for (const std::vector<float>& chunk : c) {
        all.insert(all.end(), chunk.begin(), chunk.end());
      }
    });
    return all;
  }

  proto::ShardStatus Status() {
    proto::ShardStatus st;
    shard->GetStatus(&st);
    return st;
  }

  JobConfig config;
  std::unique_ptr<Shard> shard;
};

// A guard section: loss_spike 4, `warmup` pushes, `action` on divergence.
std::function<void(JobConfig&)> Guard(OnDiverge action, int warmup = 2) {
  return [action, warmup](JobConfig& c) {
    c.guard.enabled = true;
    c.guard.loss_spike = 4;
    c.guard.warmup_pushes = warmup;
    c.guard.on_diverge = action;
  };
}

TEST_CASE("a push above clip_norm is applied scaled to it", "[guard][clip]") {
  GuardFixture f("async", [](JobConfig& c) { c.optimizer.clip_norm = 2.0; });
  const std::vector<float> before = f.Params();
  const double n = static_cast<double>(before.size());
  // Every element 0.5: norm 0.5 * sqrt(n), far above 2.
  REQUIRE(f.Push(0, 0, 0.5f, 1.0f).ok());
  const std::vector<float> after = f.Params();
  const double scale = 2.0 / (0.5 * std::sqrt(n));
  const double lr = f.config.optimizer.learning_rate;
  double moved = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(after[i] == Approx(before[i] - lr * 0.5 * scale).margin(1e-7));
    moved += std::pow(static_cast<double>(before[i]) - after[i], 2);
  }
  // The step's norm is lr * clip_norm.
  CHECK(std::sqrt(moved) == Approx(lr * 2.0).epsilon(1e-4));
  CHECK(f.Status().clipped_pushes() == 1);
  CHECK(f.Status().workers(0).clipped_pushes() == 1);

  // Below the bound: applied as it came.
  const float tiny = static_cast<float>(1.0 / n);  // norm 1/sqrt(n)
  REQUIRE(f.Push(1, 0, tiny, 1.0f).ok());
  const std::vector<float> last = f.Params();
  for (size_t i = 0; i < last.size(); ++i) {
    CHECK(last[i] == Approx(after[i] - lr * tiny).margin(1e-9));
  }
  CHECK(f.Status().clipped_pushes() == 1);
}

TEST_CASE("under sync each push is clipped before the round's mean",
          "[guard][clip]") {
  GuardFixture f("sync", [](JobConfig& c) { c.optimizer.clip_norm = 1.0; });
  const std::vector<float> before = f.Params();
  const double n = static_cast<double>(before.size());
  // Rank 0's push is clipped to norm 1; rank 1's (norm 0.5) is not.
  REQUIRE(f.Push(0, 0, 1.0f, 1.0f).ok());
  const float half = static_cast<float>(0.5 / std::sqrt(n));
  REQUIRE(f.Push(1, 0, half, 1.0f).ok());
  const std::vector<float> after = f.Params();
  const double lr = f.config.optimizer.learning_rate;
  const double mean = (1.0 / std::sqrt(n) + half) / 2;
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(after[i] == Approx(before[i] - lr * mean).margin(1e-8));
  }
  CHECK(f.Status().clipped_pushes() == 1);
}

TEST_CASE("a loss spike or a non-finite loss is named and counted",
          "[guard][diverge]") {
  GuardFixture f("async", Guard(OnDiverge::kWarn, /*warmup=*/3));
  for (uint64_t clock = 0; clock < 3; ++clock) {
    REQUIRE(f.Push(0, clock, 0.0f, 2.0f).ok());
  }
  // 7 < 4 x 2: not a spike.
  REQUIRE(f.Push(0, 3, 0.0f, 7.0f).ok());
  CHECK(f.Status().divergences() == 0);
  // 50 > 4 x (mean ~2.3): a spike, applied under warn.
  const uint64_t version = f.Status().version();
  REQUIRE(f.Push(0, 4, 0.0f, 50.0f).ok());
  proto::ShardStatus st = f.Status();
  CHECK(st.version() == version + 1);
  CHECK(st.divergences() == 1);
  CHECK(st.workers(0).divergences() == 1);
  CHECK(st.workers(0).mean_loss() == Approx(2.0 + (7.0 - 2.0) / 16));
  CHECK(st.guard_stopped().empty());
  // A non-finite loss, at any time (rank 1 has no mean yet).
  REQUIRE(f.Push(1, 0, 0.0f, std::numeric_limits<float>::quiet_NaN()).ok());
  CHECK(f.Status().workers(1).divergences() == 1);
  CHECK(f.Status().divergences() == 2);
  // A retry of a push is not watched again.
  REQUIRE(f.Push(0, 4, 0.0f, 50.0f).ok());
  CHECK(f.Status().divergences() == 2);
}

TEST_CASE("a push the policy refuses leaves the loss watch as it was",
          "[guard][diverge]") {
  GuardFixture f("async", Guard(OnDiverge::kWarn));
  REQUIRE(f.Push(0, 0, 0.0f, 1.0f).ok());
  REQUIRE(f.Push(0, 1, 0.0f, 1.0f).ok());
  // Clock 5 is not rank 0's next (2): refused, after the loss was judged.
  CHECK(absl::IsFailedPrecondition(f.Push(0, 5, 0.0f, 9.0f)));
  CHECK(absl::IsFailedPrecondition(f.Push(0, 5, 0.0f, 3.0f)));
  proto::ShardStatus st = f.Status();
  CHECK(st.divergences() == 0);
  CHECK(st.workers(0).mean_loss() == Approx(1.0));
  // The push sent again at the right clock is judged once.
  REQUIRE(f.Push(0, 2, 0.0f, 9.0f).ok());
  st = f.Status();
  CHECK(st.divergences() == 1);
  CHECK(st.workers(0).mean_loss() == Approx(1.0));
}

TEST_CASE("on_diverge stop refuses the diverging push and every later one",
          "[guard][diverge]") {
  GuardFixture f("async", Guard(OnDiverge::kStop));
  REQUIRE(f.Push(0, 0, 0.0f, 1.0f).ok());
  REQUIRE(f.Push(0, 1, 0.0f, 1.0f).ok());
  const uint64_t version = f.Status().version();
  const absl::Status spike = f.Push(0, 2, 0.0f, 9.0f);
  CHECK(absl::IsFailedPrecondition(spike));
  CHECK(absl::StrContains(spike.message(),
                          "stopped by its guard (on_diverge: stop): rank 0 "
                          "at clock 2: loss 9 is 9.0x its running mean 1"));
  // Nothing of it was applied, and the other rank is refused too.
  CHECK(f.Status().version() == version);
  const absl::Status later = f.Push(1, 0, 0.0f, 1.0f);
  CHECK(absl::IsFailedPrecondition(later));
  CHECK(later.message() == spike.message());
  CHECK(f.Status().guard_stopped() == spike.message());
}

TEST_CASE("on_diverge skip_push leaves a diverging push out of the sync round",
          "[guard][diverge][sync]") {
  GuardFixture f("sync", Guard(OnDiverge::kSkipPush));
  for (uint64_t clock = 0; clock < 2; ++clock) {
    for (uint32_t rank : {0u, 1u})
      REQUIRE(f.Push(rank, clock, 0.0f, 1.0f).ok());
  }
  const float lr = static_cast<float>(f.config.optimizer.learning_rate);
  const std::vector<float> before = f.Params();
  // Rank 1's loss spikes: its gradient stays out of the round's mean,
  // which is rank 0's alone.
  REQUIRE(f.Push(0, 2, 1.0f, 1.0f).ok());
  REQUIRE(f.Push(1, 2, 5.0f, 9.0f).ok());
  proto::ShardStatus st = f.Status();
  CHECK(st.version() == 3);
  CHECK(st.workers(1).divergences() == 1);
  CHECK(st.guard_stopped().empty());
  std::vector<float> after = f.Params();
  for (size_t i = 0; i < after.size(); i += 97) {
    CHECK(after[i] == Approx(before[i] - lr * 1.0f).margin(1e-7));
  }
  // Its retry is a duplicate: acknowledged, neither watched nor applied.
  REQUIRE(f.Push(1, 2, 5.0f, 9.0f).ok());
  CHECK(f.Status().workers(1).divergences() == 1);
  CHECK(f.Params() == after);
  // A round whose every push is skipped moves the version on, the
  // parameters staying as they are.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(f.Push(0, 3, 7.0f, nan).ok());
  REQUIRE(f.Push(1, 3, 7.0f, nan).ok());
  CHECK(f.Status().version() == 4);
  CHECK(f.Params() == after);
  // And the job goes on.
  REQUIRE(f.Push(0, 4, 0.0f, 1.0f).ok());
  REQUIRE(f.Push(1, 4, 0.0f, 1.0f).ok());
  CHECK(f.Status().version() == 5);
}

TEST_CASE("on_diverge skip_push under async acknowledges and applies nothing",
          "[guard][diverge][async]") {
  GuardFixture f("async", Guard(OnDiverge::kSkipPush));
  REQUIRE(f.Push(0, 0, 0.0f, 1.0f).ok());
  REQUIRE(f.Push(0, 1, 0.0f, 1.0f).ok());
  const uint64_t version = f.Status().version();
  const std::vector<float> before = f.Params();
  REQUIRE(f.Push(0, 2, 3.0f, 9.0f).ok());
  CHECK(f.Status().version() == version);
  CHECK(f.Params() == before);
  CHECK(f.Status().workers(0).divergences() == 1);
  // Its clock counted: the next one is taken and applied.
  REQUIRE(f.Push(0, 3, 1.0f, 1.0f).ok());
  CHECK(f.Status().version() == version + 1);
  CHECK(f.Params() != before);
}

}  // namespace
}  // namespace paramd
