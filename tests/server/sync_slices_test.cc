// A sync round pushed in slices (UpdatePolicy::PushChunks), as plain C++:
// each chunk is stepped once every expected rank pushed it and may be read
// at the next version before the round ends; the round ends exactly as
// one of whole pushes would; a slice sent again is a duplicate; a rank
// that leaves mid-push counts in the chunks it sent and no others.
#include <catch2/catch.hpp>
#include <random>

#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "server/policy/staleness_rule.h"
#include "server/policy/sync_rule.h"
#include "server/policy/update_policy.h"

namespace paramd {
namespace {

// One shard of two tensors in five chunks of two floats, SGD with
// momentum (so that the slots must agree too).
struct Sliced {
  explicit Sliced(int workers, int backup_workers = 0) {
    spec.tensors.push_back({"a", {6}, 6, 0.5f});
    spec.tensors.push_back({"b", {4}, 4, 0.5f});
    spec.total_elements = 10;
    plan = std::make_unique<PartitionPlan>(*PartitionPlan::Build(spec, 8, 1));
    store = std::make_unique<ShardStore>(
        spec, *plan, 0, 7,
        std::make_unique<SgdOptimizer>(LearningRateSchedule::Constant(0.1f),
                                       0.9f, 0.0f, false));
    policy = std::make_unique<UpdatePolicy>(
        workers, store.get(),
        std::make_unique<SyncRule>(workers, store.get(), backup_workers));
  }

  // Rank `rank`'s gradient at `clock`, by chunk: a function of both.
  std::vector<std::vector<float>> Gradient(int rank, uint64_t clock) const {
    std::mt19937 random(static_cast<uint32_t>(rank * 1000 + clock));
    std::normal_distribution<float> normal;
    std::vector<std::vector<float>> out;
    for (int c = 0; c < store->num_chunks(); ++c) {
      out.emplace_back(store->chunk_spec(c).length);
      for (float& v : out.back()) v = normal(random);
    }
    return out;
  }

  absl::Status Whole(int rank, uint64_t clock) {
    const auto grads = Gradient(rank, clock);
    std::vector<absl::Span<const float>> views(grads.begin(), grads.end());
    return policy->Push(rank, clock, views);
  }

  absl::Status Slice(int rank, uint64_t clock, std::vector<int> locals,
                     bool* complete = nullptr, bool* duplicate = nullptr) {
    const auto grads = Gradient(rank, clock);
    std::vector<absl::Span<const float>> views(grads.begin(), grads.end());
    bool c = false, d = false;
    absl::Status s = policy->PushChunks(rank, clock, locals, views, &c, &d);
    if (complete != nullptr) *complete = c;
    if (duplicate != nullptr) *duplicate = d;
    return s;
  }

  std::string State() const {
    std::string out;
    REQUIRE(store->SaveState(&out).ok());
    return out;
  }

  ModelSpec spec;
  std::unique_ptr<PartitionPlan> plan;
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<UpdatePolicy> policy;
};

TEST_CASE("rounds pushed in slices end exactly as rounds of whole pushes",
          "[policy][sync][slices]") {
  Sliced whole(3), sliced(3);
  REQUIRE(whole.store->num_chunks() == 5);
  for (uint64_t clock = 0; clock < 4; ++clock) {
    for (int r = 0; r < 3; ++r) REQUIRE(whole.Whole(r, clock).ok());
    // Each rank slices its push its own way; one sends it whole.
    REQUIRE(sliced.Slice(0, clock, {0, 1}).ok());
    REQUIRE(sliced.Slice(1, clock, {0}).ok());
    REQUIRE(sliced.Slice(0, clock, {2, 3, 4}).ok());
    REQUIRE(sliced.Whole(2, clock).ok());
    REQUIRE(sliced.Slice(1, clock, {1, 2, 3}).ok());
    REQUIRE(sliced.store->version() == clock);
    REQUIRE(sliced.Slice(1, clock, {4}).ok());
    REQUIRE(sliced.store->version() == clock + 1);
  }
  CHECK(sliced.State() == whole.State());
  CHECK(!sliced.store->stepping_chunks());
}

TEST_CASE(
    "a chunk every rank pushed is read at the next version before the "
    "round ends",
    "[policy][sync][slices]") {
  Sliced f(2);
  const std::vector<float> before = f.store->Snapshot()->params[0];
  std::vector<absl::Status> chunk0, chunk1, whole;
  (void)f.policy->WhenChunksReadable(
      0, 1, {0}, [&](absl::Status s) { chunk0.push_back(s); });
  (void)f.policy->WhenChunksReadable(
      0, 1, {1}, [&](absl::Status s) { chunk1.push_back(s); });
  (void)f.policy->WhenReadable(0, 1,
                               [&](absl::Status s) { whole.push_back(s); });
  REQUIRE(f.Slice(0, 0, {0}).ok());
  CHECK(chunk0.empty());  // Rank 1's part of chunk 0 is still to come.
  REQUIRE(f.Slice(1, 0, {0}).ok());
  REQUIRE(chunk0.size() == 1);
  CHECK(chunk0[0].ok());
  CHECK(chunk1.empty());
  CHECK(whole.empty());
  // Readers of the store still see version 0; chunk 0's next values are
  // served at version 1.
  CHECK(f.store->version() == 0);
  CHECK(f.store->Snapshot()->params[0] == before);
  const auto next = f.store->SnapshotAt(1);
  CHECK(next->version == 1);
  CHECK(next->params[0] != before);
  REQUIRE(f.Slice(0, 0, {1, 2, 3, 4}).ok());
  REQUIRE(f.Slice(1, 0, {1, 2, 3, 4}).ok());
  CHECK(chunk1.size() == 1);
  CHECK(whole.size() == 1);
  CHECK(f.store->version() == 1);
  CHECK(f.store->Snapshot()->params[0] == next->params[0]);
}

TEST_CASE("a slice sent again is a duplicate and the push counts once",
          "[policy][sync][slices]") {
  Sliced f(2), g(2);
  bool complete = false, duplicate = false;
  REQUIRE(f.Slice(0, 0, {0, 1}, &complete, &duplicate).ok());
  CHECK(!complete);
  CHECK(!duplicate);
  // The stream broke; the worker sends the step again, whole in slices.
  REQUIRE(f.Slice(0, 0, {0, 1}, &complete, &duplicate).ok());
  CHECK(duplicate);
  REQUIRE(f.Slice(0, 0, {0, 1, 2, 3, 4}, &complete, &duplicate).ok());
  CHECK(complete);
  CHECK(!duplicate);
  CHECK(f.policy->IsRetry(0, 0));
  REQUIRE(f.Slice(0, 0, {3}, &complete, &duplicate).ok());
  CHECK(complete);
  CHECK(duplicate);
  REQUIRE(f.Whole(1, 0).ok());
  CHECK(f.store->version() == 1);
  REQUIRE(g.Whole(0, 0).ok());
  REQUIRE(g.Whole(1, 0).ok());
  CHECK(f.State() == g.State());
  CHECK(f.policy->Workers()[0].accepted == 1);
}

TEST_CASE("a rank that leaves mid-push counts in the chunks it sent only",
          "[policy][sync][slices]") {
  Sliced f(2);
  // Rank 0 dies after chunks 0 and 1 of clock 0; rank 1 pushes all of it.
  REQUIRE(f.Slice(0, 0, {0, 1}).ok());
  REQUIRE(f.Whole(1, 0).ok());
  CHECK(f.store->version() == 0);  // Chunks 2-4 wait for rank 0.
  f.policy->Leave(0);
  CHECK(f.store->version() == 1);
  // What that left: chunks 0-1 stepped with the mean of both gradients,
  // chunks 2-4 with rank 1's alone.
  Sliced want(2);
  const auto g0 = want.Gradient(0, 0);
  const auto g1 = want.Gradient(1, 0);
  std::vector<std::vector<float>> mean = g1;
  for (int c = 0; c < 2; ++c) {
    for (size_t i = 0; i < mean[c].size(); ++i) {
      mean[c][i] =
          static_cast<float>((static_cast<double>(g0[c][i]) + g1[c][i]) / 2.0);
    }
  }
  std::vector<absl::Span<const float>> views(mean.begin(), mean.end());
  want.store->ApplyStep(views, 1.0f);
  CHECK(f.State() == want.State());
  // Its new process joins at the next round.
  CHECK(f.policy->ProposeClock(0) == 1);
  REQUIRE(f.policy->Join(0, 1).ok());
  REQUIRE(f.Slice(0, 1, {0, 1, 2, 3, 4}).ok());
  REQUIRE(f.Whole(1, 1).ok());
  CHECK(f.store->version() == 2);
}

TEST_CASE("a rank joining after chunks were stepped takes part next round",
          "[policy][sync][slices]") {
  Sliced f(2);
  f.policy->Leave(1);
  REQUIRE(f.Slice(0, 0, {0}).ok());  // Stepped at once: rank 0 is alone.
  CHECK(f.policy->ProposeClock(1) == 1);
  CHECK(absl::IsAborted(f.policy->Join(1, 0)));
  REQUIRE(f.policy->Join(1, 1).ok());
  REQUIRE(f.Slice(0, 0, {1, 2, 3, 4}).ok());
  CHECK(f.store->version() == 1);
}

TEST_CASE(
    "a capture while a round in slices is half stepped holds the "
    "version before it",
    "[policy][sync][slices]") {
  Sliced f(2), g(2);
  REQUIRE(f.Whole(0, 0).ok());
  REQUIRE(f.Whole(1, 0).ok());
  REQUIRE(g.Whole(0, 0).ok());
  REQUIRE(g.Whole(1, 0).ok());
  const std::string at1 = f.State();
  // Chunks 0 and 1 of round 1 are stepped, slots and all.
  REQUIRE(f.Slice(0, 1, {0, 1}).ok());
  REQUIRE(f.Slice(1, 1, {0, 1}).ok());
  REQUIRE(f.store->stepping_chunks());
  const PolicyState state = f.policy->Capture();
  CHECK(state.version == 1);
  CHECK(state.store_state == at1);
  // Both ranks are back at the open round: their retries are applied.
  CHECK(state.clocks == std::vector<uint64_t>{1, 1});
  CHECK(state.last_accepted == std::vector<int64_t>{-1, -1});
  // Restored onto another shard, the round pushed again ends where the
  // first one does.
  REQUIRE(g.policy->Restore(state).ok());
  for (Sliced* s : {&f, &g}) {
    REQUIRE(s->Slice(0, 1, {0, 1, 2, 3, 4}).ok());
    REQUIRE(s->Slice(1, 1, {0, 1, 2, 3, 4}).ok());
  }
  CHECK(f.store->version() == 2);
  CHECK(g.State() == f.State());
}

TEST_CASE("slices are refused where a round cannot commit chunk by chunk",
          "[policy][sync][slices]") {
  Sliced backup(3, /*backup_workers=*/1);
  CHECK(absl::IsFailedPrecondition(backup.Slice(0, 0, {0})));
  Sliced f(2);
  UpdatePolicy async(2, f.store.get(),
                     std::make_unique<StalenessRule>(
                         f.store.get(), StalenessRule::kUnbounded));
  const auto grads = f.Gradient(0, 0);
  std::vector<absl::Span<const float>> views(grads.begin(), grads.end());
  bool complete = false, duplicate = false;
  const absl::Status s =
      async.PushChunks(0, 0, {0}, views, &complete, &duplicate);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(f.store->version() == 0);
}

TEST_CASE("a slice of a chunk stepped without the rank is refused",
          "[policy][sync][slices]") {
  Sliced f(2);
  REQUIRE(f.Slice(0, 0, {0}).ok());
  f.policy->Leave(1);  // Chunk 0 is stepped without rank 1.
  REQUIRE(f.store->stepping_chunks());
  REQUIRE(f.policy->Join(1, 1).ok());
  // A stale process of rank 1 still sends clock 0.
  CHECK(absl::IsFailedPrecondition(f.Slice(1, 0, {0})));
  REQUIRE(f.Slice(0, 0, {1, 2, 3, 4}).ok());
  CHECK(f.store->version() == 1);
}

}  // namespace
}  // namespace paramd
