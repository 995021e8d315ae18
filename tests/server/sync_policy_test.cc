// The sync (BSP) policy as plain C++, without sockets: a pull for version
// t+1 waits until every worker pushed its clock-t gradient; the mean is
// applied in one step; wrong pushes change nothing.
#include <catch2/catch.hpp>
#include <cmath>
#include <future>
#include <thread>

#include "common/base/cancellation.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "server/policy/sync_rule.h"
#include "server/policy/update_policy.h"

namespace paramd {
namespace {

// A one-shard store over two small tensors, plain SGD with lr 1 so that
// p_new = p - mean(g) exactly.
struct Fixture {
  explicit Fixture(int workers) : num_workers(workers) {
    spec.tensors.push_back({"a", {3}, 3, 0.5f});
    spec.tensors.push_back({"b", {2}, 2, 0.5f});
    spec.total_elements = 5;
    plan = std::make_unique<PartitionPlan>(*PartitionPlan::Build(spec, 8, 1));
    store = std::make_unique<ShardStore>(
        spec, *plan, 0, 1,
        std::make_unique<SgdOptimizer>(LearningRateSchedule::Constant(1.0f),
                                       0.0f, 0.0f, false));
    policy = std::make_unique<UpdatePolicy>(
        workers, store.get(), std::make_unique<SyncRule>(workers, store.get()));
    initial = Params();
  }

  // Every chunk's values, concatenated in local order.
  std::vector<float> Params() const {
    std::vector<float> out;
    store->Read([&](uint64_t, absl::Span<const std::vector<float>> chunks) {
      for (const auto& c : chunks) out.insert(out.end(), c.begin(), c.end());
    });
    return out;
  }

  // A gradient whose every element is `value`, shaped like the store.
  absl::Status Push(int rank, uint64_t clock, float value,
                    bool* duplicate = nullptr) {
    grads.clear();
    for (int i = 0; i < store->num_chunks(); ++i) {
      grads.emplace_back(store->chunk_spec(i).length, value);
    }
    std::vector<absl::Span<const float>> views(grads.begin(), grads.end());
    return policy->Push(rank, clock, views, {}, duplicate);
  }

  absl::Status TryRead(uint64_t clock) {
    return policy->WaitReadable(0, clock, absl::InfinitePast());
  }

  int num_workers;
  ModelSpec spec;
  std::unique_ptr<PartitionPlan> plan;
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<UpdatePolicy> policy;
  std::vector<float> initial;
  std::vector<std::vector<float>> grads;
};

TEST_CASE("a pull for version t+1 waits until every worker pushed clock t",
          "[policy][sync]") {
  Fixture f(3);
  CHECK(f.TryRead(0).ok());  // version 0 exists from the start
  CHECK(absl::IsDeadlineExceeded(f.TryRead(1)));
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  CHECK(absl::IsDeadlineExceeded(f.TryRead(1)));
  REQUIRE(f.Push(2, 0, 2.0f).ok());
  CHECK(absl::IsDeadlineExceeded(f.TryRead(1)));
  CHECK(f.store->version() == 0);
  CHECK(f.Params() == f.initial);  // nothing applied before the round is full
  REQUIRE(f.Push(1, 0, 6.0f).ok());
  CHECK(f.TryRead(1).ok());
  CHECK(f.store->version() == 1);
  CHECK(absl::IsDeadlineExceeded(f.TryRead(2)));
  // Mean of 1, 2, 6 is 3.
  const std::vector<float> p = f.Params();
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(p[i] == Approx(f.initial[i] - 3.0f));
}

TEST_CASE("a blocked pull is released by the last push of the round",
          "[policy][sync]") {
  Fixture f(2);
  std::promise<absl::Status> result;
  std::future<absl::Status> done = result.get_future();
  std::thread waiter([&] {
    result.set_value(f.policy->WaitReadable(1, 1, absl::InfiniteFuture()));
  });
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  // The waiter found version 1 missing and waits (rather than returning).
  REQUIRE(f.policy->TEST_AwaitBlocked(1, absl::Seconds(30)));
  CHECK(done.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  REQUIRE(f.Push(1, 0, 1.0f).ok());
  CHECK(done.get().ok());
  waiter.join();
}

TEST_CASE(
    "a blocked pull ends Cancelled when its caller cancels, and the round "
    "goes on without it",
    "[policy][sync]") {
  Fixture f(2);
  Cancellation cancel;
  std::promise<absl::Status> result;
  std::future<absl::Status> done = result.get_future();
  std::thread waiter([&] {
    result.set_value(
        f.policy->WaitReadable(1, 1, absl::InfiniteFuture(), &cancel));
  });
  REQUIRE(f.policy->TEST_AwaitBlocked(1, absl::Seconds(30)));
  CHECK(done.wait_for(std::chrono::seconds(0)) == std::future_status::timeout);
  // No deadline and nothing pushed: only the cancel ends the wait.
  cancel.Cancel();
  const absl::Status s = done.get();
  CHECK(absl::IsCancelled(s));
  CHECK(s.message() == "Pull: the caller cancelled");
  waiter.join();
  // Its waiter is gone; the round completes as ever.
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  REQUIRE(f.Push(1, 0, 1.0f).ok());
  CHECK(f.TryRead(1).ok());
  // A wait whose caller cancelled before it began ends at once.
  CHECK(absl::IsCancelled(
      f.policy->WaitReadable(0, 2, absl::InfiniteFuture(), &cancel)));
}

TEST_CASE("workers move in lock-step over many rounds", "[policy][sync]") {
  Fixture f(2);
  std::vector<float> expected = f.initial;
  for (uint64_t t = 0; t < 5; ++t) {
    CHECK(f.TryRead(t).ok());
    CHECK(absl::IsDeadlineExceeded(f.TryRead(t + 1)));
    REQUIRE(f.Push(1, t, static_cast<float>(t)).ok());
    // Rank 1 is a clock ahead of rank 0 now; it may not push again.
    CHECK(absl::IsFailedPrecondition(f.Push(1, t + 1, 0.0f)));
    REQUIRE(f.Push(0, t, static_cast<float>(t) + 2.0f).ok());
    for (float& e : expected) e -= static_cast<float>(t) + 1.0f;
    CHECK(f.store->version() == t + 1);
  }
  const std::vector<float> p = f.Params();
  for (size_t i = 0; i < p.size(); ++i) CHECK(p[i] == Approx(expected[i]));
  CHECK(f.policy->ProposeClock(0) == 5);
}

TEST_CASE(
    "a retried push is acknowledged once and not applied again; stale and "
    "future pushes are refused and change nothing",
    "[policy][sync]") {
  Fixture f(2);
  bool duplicate = true;
  REQUIRE(f.Push(0, 0, 1.0f, &duplicate).ok());
  CHECK_FALSE(duplicate);
  // The same (rank, clock) again while its round is open: a retry.
  REQUIRE(f.Push(0, 0, 100.0f, &duplicate).ok());
  CHECK(duplicate);
  CHECK(absl::IsFailedPrecondition(f.Push(1, 1, 100.0f)));  // future
  CHECK(absl::IsInvalidArgument(f.Push(2, 0, 100.0f)));     // no such rank
  REQUIRE(f.Push(1, 0, 3.0f, &duplicate).ok());
  CHECK_FALSE(duplicate);
  // The retry and the refused pushes left no trace: the mean is (1 + 3) / 2.
  const std::vector<float> p = f.Params();
  for (size_t i = 0; i < p.size(); ++i)
    CHECK(p[i] == Approx(f.initial[i] - 2.0f));
  CHECK(f.store->version() == 1);
  // A retry after its round was applied: acknowledged, not applied.
  REQUIRE(f.Push(1, 0, 50.0f, &duplicate).ok());
  CHECK(duplicate);
  CHECK(f.store->version() == 1);
  // Once rank 0 pushed clock 1, clock 0 is stale, not a retry.
  REQUIRE(f.Push(0, 1, 1.0f, &duplicate).ok());
  CHECK_FALSE(duplicate);
  absl::Status stale = f.Push(0, 0, 1.0f);
  CHECK(absl::IsFailedPrecondition(stale));
  CHECK(std::string(stale.message()).find("already applied") !=
        std::string::npos);
  CHECK(f.Params() == p);
  // Rank 1 registers again past its last push: a retry of that push is
  // still recognised as applied, and its next clock is applied.
  REQUIRE(f.policy->Join(1, 1).ok());
  REQUIRE(f.Push(1, 0, 3.0f, &duplicate).ok());
  CHECK(duplicate);
  REQUIRE(f.Push(1, 1, 3.0f, &duplicate).ok());
  CHECK_FALSE(duplicate);
  CHECK(f.store->version() == 2);
  CHECK(absl::IsFailedPrecondition(f.Push(1, 0, 3.0f)));
  CHECK(f.store->version() == 2);
}

TEST_CASE("shutdown wakes a waiting pull with Unavailable", "[policy][sync]") {
  Fixture f(2);
  std::promise<absl::Status> result;
  std::future<absl::Status> done = result.get_future();
  std::thread waiter([&] {
    result.set_value(f.policy->WaitReadable(0, 1, absl::InfiniteFuture()));
  });
  f.policy->Shutdown();
  CHECK(absl::IsUnavailable(done.get()));
  waiter.join();
  CHECK(absl::IsUnavailable(f.Push(0, 0, 1.0f)));
}

TEST_CASE(
    "a pull waiting without a thread (WhenReadable) runs on the push that "
    "completes the round, once",
    "[policy][sync]") {
  Fixture f(2);
  std::vector<absl::Status> ran;
  auto record = [&ran](absl::Status s) { ran.push_back(std::move(s)); };
  // Readable already: runs here.
  CHECK(f.policy->WhenReadable(0, 0, record) == 0);
  REQUIRE(ran.size() == 1);
  CHECK(ran[0].ok());
  ran.clear();
  const uint64_t waiting = f.policy->WhenReadable(1, 1, record);
  CHECK(waiting != 0);
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  CHECK(ran.empty());  // Rank 1's push of clock 0 is still missing.
  // Its version is applied before the waiter runs, on the pushing thread.
  uint64_t version_seen = 0;
  const uint64_t second = f.policy->WhenReadable(0, 1, [&](absl::Status s) {
    version_seen = f.store->version();  // The lock is released here.
    ran.push_back(std::move(s));
  });
  REQUIRE(f.Push(1, 0, 1.0f).ok());
  REQUIRE(ran.size() == 2);
  CHECK(ran[0].ok());
  CHECK(ran[1].ok());
  CHECK(version_seen == 1);
  CHECK(f.policy->CancelWhenReadable(waiting) == nullptr);  // It ran.
  CHECK(f.policy->CancelWhenReadable(second) == nullptr);
  REQUIRE(f.Push(0, 1, 1.0f).ok());
  REQUIRE(f.Push(1, 1, 1.0f).ok());
  CHECK(ran.size() == 2);  // Nothing runs twice.
}

TEST_CASE(
    "a cancelled waiter never runs; shutdown runs the rest with "
    "Unavailable",
    "[policy][sync]") {
  Fixture f(2);
  int cancelled_runs = 0;
  std::vector<absl::Status> ran;
  const uint64_t gone = f.policy->WhenReadable(
      0, 1, [&cancelled_runs](absl::Status) { ++cancelled_runs; });
  std::function<void(absl::Status)> handed_back =
      f.policy->CancelWhenReadable(gone);
  REQUIRE(handed_back != nullptr);
  CHECK(f.policy->CancelWhenReadable(gone) == nullptr);
  (void)f.policy->WhenReadable(
      1, 1, [&ran](absl::Status s) { ran.push_back(std::move(s)); });
  (void)f.policy->WhenReadable(
      1, 2, [&ran](absl::Status s) { ran.push_back(std::move(s)); });
  f.policy->Shutdown();
  REQUIRE(ran.size() == 2);
  CHECK(absl::IsUnavailable(ran[0]));
  CHECK(absl::IsUnavailable(ran[1]));
  CHECK(cancelled_runs == 0);
  handed_back(absl::CancelledError("by the test"));  // The caller's to run.
  CHECK(cancelled_runs == 1);
  // After shutdown, a new waiter hears so at once.
  CHECK(f.policy->WhenReadable(0, 5, [&ran](absl::Status s) {
    ran.push_back(std::move(s));
  }) == 0);
  REQUIRE(ran.size() == 3);
  CHECK(absl::IsUnavailable(ran[2]));
}

TEST_CASE("a worker leaving releases the waiters of the round it held up",
          "[policy][sync]") {
  Fixture f(2);
  std::vector<absl::Status> ran;
  (void)f.policy->WhenReadable(
      0, 1, [&ran](absl::Status s) { ran.push_back(std::move(s)); });
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  CHECK(ran.empty());
  f.policy->Leave(1);  // Its lease expired: the round completes without it.
  REQUIRE(ran.size() == 1);
  CHECK(ran[0].ok());
  CHECK(f.store->version() == 1);
}

TEST_CASE("the deadline error says what the pull waits for", "[policy][sync]") {
  Fixture f(3);
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  absl::Status s = f.TryRead(1);
  REQUIRE(absl::IsDeadlineExceeded(s));
  CHECK(std::string(s.message())
            .find("round 0 waits for rank(s) 1, 2 to push clock 0") !=
        std::string::npos);
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

TEST_CASE("the mean of finite gradients near the float limit stays finite",
          "[policy][sync]") {
  // Summed in float, two gradients of 3e38 made inf and the parameter
  // -inf; the mean is 3e38.
  Fixture f(2);
  REQUIRE(f.Push(0, 0, 3e38f).ok());
  REQUIRE(f.Push(1, 0, 3e38f).ok());
  const std::vector<float> p = f.Params();
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK(std::isfinite(p[i]));
    CHECK(p[i] == f.initial[i] - 3e38f);
  }
  // And mixed signs cancel as they should: (3e38 + -3e38) / 2 = 0.
  const std::vector<float> before = f.Params();
  REQUIRE(f.Push(0, 1, 3e38f).ok());
  REQUIRE(f.Push(1, 1, -3e38f).ok());
  CHECK(f.Params() == before);
}

// Rank r's gradient at element i: magnitudes far apart, so that the
// precision and the order of the sum show in the mean.
float MixedGradient(int rank, int round, size_t i) {
  static constexpr float kValues[] = {1e8f, 1.0f,    -1e8f, 3.0e-3f,
                                      7.5f, -2.5e7f, 0.1f};
  return kValues[(rank * 3 + round * 5 + i) % 7] * (1.0f + 0.001f * i);
}

// How a round ends in the test below: every rank pushes; rank 0 (the last
// to push) leaves instead; rank 0 skips its push (guard.on_diverge:
// skip_push); every rank but the first to push skips.
enum class RoundEnd { kEveryonePushes, kLastLeaves, kLastSkipped, kOneSums };

TEST_CASE(
    "the round's mean is its gradients summed in double in push order and "
    "rounded once, however the round completes",
    "[policy][sync]") {
  for (int workers = 1; workers <= 5; ++workers) {
    for (RoundEnd end : {RoundEnd::kEveryonePushes, RoundEnd::kLastLeaves,
                         RoundEnd::kLastSkipped, RoundEnd::kOneSums}) {
      if (workers == 1 && end != RoundEnd::kEveryonePushes) continue;
      CAPTURE(workers, static_cast<int>(end));
      Fixture f(workers);
      std::vector<float> expected = f.initial;
      // Round 0 has every push (and, from three workers, leaves the sum's
      // buffers holding its sum); rounds 1 and 2 end as `end` says, but a
      // rank leaves only in the last.
      constexpr int kRounds = 3;
      for (int round = 0; round < kRounds; ++round) {
        CAPTURE(round);
        RoundEnd how = round == 0 ? RoundEnd::kEveryonePushes : end;
        if (how == RoundEnd::kLastLeaves && round < kRounds - 1) {
          how = RoundEnd::kEveryonePushes;
        }
        std::vector<double> sum(expected.size(), 0.0);
        int summed = 0;
        // Ranks push from the highest down; rank 0 is the last.
        for (int rank = workers - 1; rank >= 0; --rank) {
          if (rank == 0 && how == RoundEnd::kLastLeaves) {
            f.policy->Leave(rank);
            continue;
          }
          const bool skip = (rank == 0 && how == RoundEnd::kLastSkipped) ||
                            (rank < workers - 1 && how == RoundEnd::kOneSums);
          std::vector<std::vector<float>> grads;
          size_t i = 0;
          for (int c = 0; c < f.store->num_chunks(); ++c) {
            grads.emplace_back();
            for (int64_t j = 0; j < f.store->chunk_spec(c).length; ++j, ++i) {
              grads.back().push_back(MixedGradient(rank, round, i));
              if (!skip) sum[i] += grads.back().back();
            }
          }
          if (!skip) ++summed;
          std::vector<absl::Span<const float>> views(grads.begin(),
                                                     grads.end());
          REQUIRE(f.policy->Push(rank, round, views, {}, nullptr, skip).ok());
        }
        REQUIRE(f.store->version() == static_cast<uint64_t>(round + 1));
        for (size_t i = 0; i < expected.size(); ++i) {
          const float mean = static_cast<float>(sum[i] * (1.0 / summed));
          expected[i] = expected[i] - mean;  // SGD, lr 1.
        }
        const std::vector<float> params = f.Params();
        for (size_t i = 0; i < params.size(); ++i) {
          CAPTURE(i);
          CHECK(params[i] == expected[i]);
        }
      }
    }
  }
}

TEST_CASE("a join far beyond every clock is refused", "[policy][sync]") {
  Fixture f(2);
  const absl::Status s = f.policy->Join(1, UINT64_MAX);
  CHECK(absl::IsInvalidArgument(s));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("asks to join at clock 18446744073709551615"));
  // Rank 1 is still waited for at round 0.
  REQUIRE(f.Push(0, 0, 1.0f).ok());
  CHECK(absl::IsDeadlineExceeded(f.TryRead(1)));
  // Within the slack it may join ahead (a proposal from a shard a step on).
  CHECK(f.policy->Join(1, UpdatePolicy::kJoinSlack).ok());
}

}  // namespace
}  // namespace paramd
