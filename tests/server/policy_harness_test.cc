// Every policy under one deterministic harness, without sockets: scripted
// interleavings of pushes, pulls, leaves and joins of several workers, and
// for each pull exactly whether it may proceed.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "server/policy/policy_factory.h"
#include "server/policy/update_policy.h"

namespace paramd {
namespace {

// One shard over a 4-element tensor, plain SGD with lr 1, so each applied
// gradient of ones subtracts exactly 1 (or the mean, under sync).
class Harness {
 public:
  Harness(PolicyType type, int workers, int staleness,
          StalenessScaling scaling = StalenessScaling::kNone,
          int backup_workers = 0)
      : clocks_(workers, 0) {
    spec_.tensors.push_back({"w", {4}, 4, 0.5f});
    spec_.total_elements = 4;
    plan_ =
        std::make_unique<PartitionPlan>(*PartitionPlan::Build(spec_, 16, 1));
    store_ = std::make_unique<ShardStore>(
        spec_, *plan_, 0, 1,
        std::make_unique<SgdOptimizer>(LearningRateSchedule::Constant(1.0f),
                                       0.0f, 0.0f, false));
    PolicyConfig config;
    config.type = type;
    config.staleness = staleness;
    config.staleness_scaling = scaling;
    config.backup_workers = backup_workers;
    policy_ = MakeUpdatePolicy(config, workers, store_.get());
  }

  // Runs a script of space-separated steps and checks each expectation:
  //   pR    rank R pushes its next clock (a gradient of ones); must succeed
  //   pR*K  ... a gradient whose every element is K
  //   pR!   ... must be refused as Aborted (dropped from the live set)
  //   rR    a pull of rank R at its clock may proceed (and is served the
  //         store's version, as a shard's pull is)
  //   wR    ... must wait
  //   lR    rank R leaves the live set (lease expired)
  //   jR=C  rank R is proposed clock C and joins there
  //   JR=C  rank R's join at clock C is refused (Aborted)
  //   vN    the store is at version N
  void Run(const std::string& script) {
    const std::vector<std::string> steps =
        absl::StrSplit(script, ' ', absl::SkipEmpty());
    for (const std::string& step : steps) {
      INFO("step '" << step << "' of: " << script);
      const char op = step[0];
      const int rank = step[1] - '0';
      switch (op) {
        case 'p': {
          const size_t star = step.find('*');
          const float value = star == std::string::npos
                                  ? 1.0f
                                  : std::stof(step.substr(star + 1));
          const std::vector<float> g(4, value);
          const absl::Span<const float> grads[] = {g};
          absl::Status s = policy_->Push(rank, clocks_[rank], grads);
          if (step.back() == '!') {
            CHECK(absl::IsAborted(s));
          } else {
            INFO(s.ToString());
            REQUIRE(s.ok());
            ++clocks_[rank];
          }
          break;
        }
        case 'r':
        case 'w': {
          absl::Status s =
              policy_->WaitReadable(rank, clocks_[rank], absl::InfinitePast());
          const std::string why = policy_->WaitingOn(rank, clocks_[rank]);
          INFO("rank " << rank << " at clock " << clocks_[rank] << ": "
                       << s.ToString() << " / waiting on: " << why);
          if (op == 'r') {
            CHECK(s.ok());
            CHECK(why.empty());
            policy_->NotePulled(rank, store_->version());
          } else {
            CHECK(absl::IsDeadlineExceeded(s));
            CHECK_FALSE(why.empty());
          }
          break;
        }
        case 'l':
          policy_->Leave(rank);
          break;
        case 'j': {
          const uint64_t expected = std::stoull(step.substr(3));
          CHECK(policy_->ProposeClock(rank) == expected);
          REQUIRE(policy_->Join(rank, expected).ok());
          clocks_[rank] = expected;
          break;
        }
        case 'J':
          CHECK(absl::IsAborted(
              policy_->Join(rank, std::stoull(step.substr(3)))));
          break;
        case 'v':
          CHECK(store_->version() == std::stoull(step.substr(1)));
          break;
        default:
          FAIL("bad script step " << step);
      }
    }
  }

  UpdatePolicy& policy() { return *policy_; }
  // The clock the script's next push of `rank` carries.
  void SetClock(int rank, uint64_t clock) { clocks_[rank] = clock; }
  float value() {
    float v = 0;
    store_->Read(
        [&](uint64_t, absl::Span<const std::vector<float>> c) { v = c[0][0]; });
    return v;
  }

 private:
  ModelSpec spec_;
  std::unique_ptr<PartitionPlan> plan_;
  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<UpdatePolicy> policy_;
  std::vector<uint64_t> clocks_;
};

TEST_CASE("sync is lock-step", "[policy][sync]") {
  Harness h(PolicyType::kSync, 3, 0);
  CHECK(std::string(h.policy().name()) == "sync");
  h.Run("r0 r1 r2 p0 w0 p1 w0 w1 v0 p2 r0 r1 r2 v1");
  // Rank 0 races ahead by one; its next pull waits for the others again.
  h.Run("p0 w0 p2 w0 p1 r0 v2");
}

TEST_CASE("async never blocks on another worker", "[policy][async]") {
  Harness h(PolicyType::kAsync, 3, 0);
  CHECK(std::string(h.policy().name()) == "async");
  // Rank 0 runs 5 clocks ahead, rank 2 never pushes: nobody waits, and
  // every push is its own step.
  h.Run("p0 r0 p0 r0 p0 r0 p0 r0 p0 r0 v5 r1 p1 r1 r2 v6");
}

TEST_CASE("ssp with staleness 1 lets a worker run one clock ahead",
          "[policy][ssp]") {
  Harness h(PolicyType::kSsp, 3, 1);
  CHECK(std::string(h.policy().name()) == "ssp");
  // Rank 0 at clock 1 may read (slowest 0 >= 1 - 1); at clock 2 it is two
  // clocks ahead of ranks 1 and 2 and waits until both reach clock 1.
  h.Run("p0 r0 p0 w0 v2 p1 w0 p2 r0 v4");
  // Pushes are applied as they arrive, not averaged.
  h.Run("p1 p2 v6");
}

TEST_CASE("ssp with staleness 0 waits like sync but applies every push",
          "[policy][ssp]") {
  Harness h(PolicyType::kSsp, 2, 0);
  h.Run("p0 w0 v1 p1 r0 r1 v2 p1 w1 p0 r1 r0 v4");
}

TEST_CASE("a worker that leaves stops holding the others",
          "[policy][liveness]") {
  SECTION("sync: the round completes without it") {
    Harness h(PolicyType::kSync, 3, 0);
    h.Run("p0 p1 w0 v0 l2 r0 r1 v1 p0 p1 r0 v2");
    // Its pushes are refused until it joins again, at the current round.
    h.Run("p2! j2=2 p2 w2 p0 w0 p1 r0 r2 v3");
  }
  SECTION("sync: a gradient pushed before leaving still counts") {
    Harness h(PolicyType::kSync, 2, 0);
    const float start = h.value();
    h.Run("p1*3 l1 v0 p0 v1 r0");
    CHECK(h.value() == Approx(start - 2.0f));  // the mean of 3 and 1
  }
  SECTION("ssp: the slow worker leaving unblocks the fast one") {
    Harness h(PolicyType::kSsp, 2, 1);
    h.Run("p0 p0 w0 l1 r0 p0 r0");
    // It rejoins at the slowest other live clock, ahead of its own.
    h.Run("j1=3 r1 p1 r1");
  }
  SECTION("async: leaving and rejoining keeps its own clock if ahead") {
    Harness h(PolicyType::kAsync, 2, 0);
    h.Run("p1 p1 p1 l1 p0 j1=3 r1");
  }
}

TEST_CASE("joins at an agreed clock, later than the proposal if need be",
          "[policy][liveness]") {
  SECTION("sync: a rank joining at a later round is not waited for before") {
    // Two shards may propose different rounds; the worker joins all at the
    // larger. Here this shard is at round 0 and the rank joins at round 1.
    Harness h(PolicyType::kSync, 2, 0);
    h.Run("l1 p0 v1 r0");
    CHECK(h.policy().ProposeClock(1) == 1);
    REQUIRE(h.policy().Join(1, 2).ok());  // join at round 2
    h.Run("p0 v2 r0 p0 w0");              // round 2 waits for rank 1 now
    // A join at a round already applied is refused: register again.
    h.Run("J0=0");
  }
  SECTION("sync: a retried join at a later round releases the current one") {
    // Registration attempt 1 joined rank 1 here at round 0; another shard
    // had moved on, so attempt 2 joins it at round 1 everywhere. Round 0,
    // already pushed by rank 0, must not wait for rank 1 any more.
    Harness h(PolicyType::kSync, 2, 0);
    h.Run("l1 j1=0 p0 w0 v0");
    REQUIRE(h.policy().Join(1, 1).ok());
    h.Run("v1 r0");
  }
  SECTION("ssp: a rank never dropped keeps its own clock") {
    // Rank 1 registers late: rank 0 ran ahead as far as the bound allows.
    Harness h(PolicyType::kSsp, 2, 2);
    h.Run("p0 p0 p0 w0 j1=0 r1 p1 r0");
  }
  SECTION("ssp: not below the rank's own clock") {
    Harness h(PolicyType::kSsp, 2, 1);
    h.Run("p1 p1 l1 J1=1 j1=2");
  }
}

TEST_CASE("sync averages the round's gradients over the ranks that pushed",
          "[policy][sync]") {
  Harness h(PolicyType::kSync, 3, 0);
  const float start = h.value();
  h.Run("p0 p1 l2 v1");  // mean of two gradients of ones
  CHECK(h.value() == Approx(start - 1.0f));
}

TEST_CASE("waits say which ranks and which clock", "[policy][diagnostics]") {
  SECTION("sync") {
    Harness h(PolicyType::kSync, 4, 0);
    h.Run("p0 p2");
    CHECK(h.policy().WaitingOn(0, 1) ==
          "version 1: round 0 waits for rank(s) 1, 3 to push clock 0");
  }
  SECTION("ssp") {
    Harness h(PolicyType::kSsp, 3, 2);
    h.Run("p0 p0 p0 p1");
    CHECK(h.policy().WaitingOn(0, 3) ==
          "rank(s) 2 to reach clock 1 (staleness bound 2)");
    CHECK(h.policy().WaitingOn(1, 2) == "its own push of clock 1");
  }
}

// Counts of the staleness histogram's first buckets (tau = 1, 2, 3, 4), not
// cumulative.
std::vector<uint64_t> StalenessCounts(const UpdatePolicy& policy) {
  const HistogramSnapshot h = policy.push_staleness().Snapshot();
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < 4; ++i) {
    counts.push_back(h.cumulative[i] - (i == 0 ? 0 : h.cumulative[i - 1]));
  }
  return counts;
}

TEST_CASE("a push's staleness is the versions since its rank's pull",
          "[policy][staleness]") {
  SECTION("async: each push after the others' is one version staler") {
    Harness h(PolicyType::kAsync, 3, 0);
    const float start = h.value();
    h.Run("r0 r1 r2 p1 p2 p0 v3");
    CHECK(StalenessCounts(h.policy()) == std::vector<uint64_t>{1, 1, 1, 0});
    CHECK(h.policy().push_staleness().Snapshot().sum == 6);
    CHECK(h.value() == Approx(start - 3.0f));  // none: every step whole
    // A rank that pulls again is fresh again; one that did not is staler.
    // (Rank 2's second push: 5 versions after its pull of version 0.)
    h.Run("r1 p1 p2 v5");
    CHECK(StalenessCounts(h.policy()) == std::vector<uint64_t>{2, 1, 1, 0});
    CHECK(h.policy().push_staleness().Snapshot().sum == 12);
  }
  SECTION("a rank never seen pulling counts as fresh") {
    Harness h(PolicyType::kAsync, 2, 0);
    h.Run("p0 p1 p0");
    CHECK(StalenessCounts(h.policy()) == std::vector<uint64_t>{3, 0, 0, 0});
  }
  SECTION("sync: every push of a round is of the round's version") {
    Harness h(PolicyType::kSync, 3, 0);
    h.Run("r0 r1 r2 p0 p1 p2 r0 r1 r2 p2 p1 p0 v2");
    CHECK(StalenessCounts(h.policy()) == std::vector<uint64_t>{6, 0, 0, 0});
  }
}

TEST_CASE("staleness_scaling inverse divides a push's step by its staleness",
          "[policy][staleness]") {
  SECTION("async") {
    Harness h(PolicyType::kAsync, 3, 0, StalenessScaling::kInverse);
    const float start = h.value();
    // Steps of 1, 1/2 and 1/3: rank 2's gradient is 2 versions old when
    // applied, rank 0's 3.
    h.Run("r0 r1 r2 p1 p2 p0 v3");
    CHECK(h.value() == Approx(start - (1.0f + 0.5f + 1.0f / 3.0f)));
    // Rank 1 pulls again and pushes fresh: a whole step.
    const float before = h.value();
    h.Run("r1 p1 v4");
    CHECK(h.value() == Approx(before - 1.0f));
  }
  SECTION("ssp, within its bound") {
    Harness h(PolicyType::kSsp, 2, 1, StalenessScaling::kInverse);
    const float start = h.value();
    // Rank 0 runs a clock ahead; rank 1's push then lands 3 versions after
    // its pull of version 0 (two of rank 0's steps came in between).
    h.Run("r0 r1 p0 r0 p0 p1 v3");
    CHECK(h.value() == Approx(start - (1.0f + 1.0f + 1.0f / 3.0f)));
  }
}

TEST_CASE(
    "backup workers: a round closes without the last b, whose late "
    "pushes are acknowledged and never applied to a later round",
    "[policy][sync][backup]") {
  Harness h(PolicyType::kSync, 3, 0, StalenessScaling::kNone, 1);
  const float start = h.value();
  // Round 0 closes with ranks 0 and 1: the mean of two gradients of ones.
  h.Run("r0 r1 r2 p0 w0 p1 v1 r0 r1");
  CHECK(h.value() == Approx(start - 1.0f));
  CHECK(h.policy().WaitingOn(0, 2) ==
        "version 2: round 1 waits for 2 more push(es) of rank(s) 0, 1, 2 to "
        "clock 1 (policy.backup_workers 1)");
  // Rank 2's push of round 0 comes late, while round 1 is open: dropped,
  // answered OK, and round 1's mean is still of ranks 0 and 1 only.
  h.Run("p2*100 v1 p0 p1 v2");
  CHECK(h.value() == Approx(start - 2.0f));
  std::vector<PolicyWorker> workers = h.policy().Workers();
  CHECK(workers[2].dropped == 1);
  CHECK(workers[2].clock == 1);
  // Its retry is a duplicate, not a second drop.
  bool duplicate = false;
  const std::vector<float> g(4, 100.0f);
  const absl::Span<const float> grads[] = {g};
  REQUIRE(h.policy().Push(2, 0, grads, {}, &duplicate).ok());
  CHECK(duplicate);
  CHECK(h.policy().Workers()[2].dropped == 1);
  // Its push of round 1 is late too; then it continues at round 2 (as the
  // worker does after pulling version 2) and counts in that round.
  h.Run("p2*100 v2");
  CHECK(h.policy().Workers()[2].dropped == 2);
  h.SetClock(2, 2);
  h.Run("p2*4 p0 v3");  // mean of 4 and 1
  CHECK(h.value() == Approx(start - 2.0f - 2.5f));
  // A push older than the rank's clock is still refused.
  REQUIRE(absl::IsFailedPrecondition(h.policy().Push(2, 1, grads)));
}

}  // namespace
}  // namespace paramd
