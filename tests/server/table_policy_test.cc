// A policy per table (model.embeddings[i].policy: async). Under a sync job
// an async table's rows are applied as each push is accepted, each push's
// by itself (as an async job applies them), and read without waiting for
// the round, while the dense part and sync tables keep the round's mean;
// exactly once holds for a retried push and for a push whose round a
// checkpoint cut in two and a restore resumed.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "server/policy/staleness_rule.h"
#include "server/policy/sync_rule.h"
#include "server/policy/update_policy.h"
#include "server/shard/shard.h"
#include "server/store/row_table.h"
#include "server/store/shard_store.h"
#include "tests/row_pushes.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::PullTableRows;
using testing::RegisteredShard;
using testing::RowsJob;

constexpr char kAsyncTable[] = "      policy: async\n";

// `rank`'s push at `clock`: every chunk's gradient `dense`, rows `ids`.
proto::PushRequest Push(const Shard& shard, const JobConfig& config,
                        uint32_t rank, uint64_t clock, float dense,
                        const std::vector<uint64_t>& ids) {
  proto::PushRequest p =
      testing::WholePush(shard, config.job_id, rank, clock, dense);
  *p.mutable_rows() = testing::RowPush(shard, config, rank, clock, ids).rows();
  return p;
}

// Table 0's rows `ids` as rank 0 at `clock` reads them, without waiting.
std::vector<float> RowsNow(Shard& shard, const JobConfig& config,
                           uint64_t clock, const std::vector<uint64_t>& ids) {
  absl::StatusOr<std::vector<float>> rows =
      PullTableRows(shard, config, 0, clock, ids, absl::InfinitePast());
  INFO(rows.status().ToString());
  REQUIRE(rows.ok());
  return *rows;
}

TEST_CASE("under sync, an async table's rows apply as each push comes",
          "[table_policy]") {
  const JobConfig hybrid = RowsJob("sync", 1, "0", "1000", kAsyncTable);
  const JobConfig sync = RowsJob("sync");
  const JobConfig async = RowsJob("async");
  REQUIRE(hybrid.model.embeddings[0].async());
  std::unique_ptr<Shard> shard = RegisteredShard(hybrid);
  std::unique_ptr<Shard> all_sync = RegisteredShard(sync);
  std::unique_ptr<Shard> all_async = RegisteredShard(async);
  const std::vector<uint64_t> ids = {1, 2, 3};
  const std::vector<float> initial = RowsNow(*shard, hybrid, 0, ids);
  const std::vector<std::pair<Shard*, const JobConfig*>> shards = {
      {shard.get(), &hybrid},
      {all_sync.get(), &sync},
      {all_async.get(), &async}};
  proto::PushResponse r;
  for (auto [s, c] : shards) {
    REQUIRE(s->Push(Push(*s, *c, 0, 0, 0.25f, {1, 2}), &r).ok());
  }
  // The round is open: the version stays, but rank 0's rows are in and it
  // reads them at its next clock without waiting for rank 1.
  CHECK(shard->store().version() == 0);
  const std::vector<float> after_rank0 = RowsNow(*shard, hybrid, 1, ids);
  CHECK(after_rank0 != initial);
  CHECK(after_rank0 == RowsNow(*all_async, async, 1, ids));
  // Rank 1 has not pushed clock 0 here: its read of clock 1 waits for
  // that, its own push, and nothing else.
  absl::StatusOr<std::vector<float>> early =
      PullTableRows(*shard, hybrid, 1, 1, ids, absl::InfinitePast());
  CHECK(absl::IsDeadlineExceeded(early.status()));
  CHECK(absl::StrContains(early.status().message(), "its own push of clock 0"));
  // The sync table's rows wait for the round.
  CHECK(absl::IsDeadlineExceeded(
      PullTableRows(*all_sync, sync, 0, 1, ids, absl::InfinitePast())
          .status()));

  for (auto [s, c] : shards) {
    REQUIRE(s->Push(Push(*s, *c, 1, 0, 0.75f, {2, 3}), &r).ok());
  }
  CHECK(shard->store().version() == 1);
  // Rows: each push by itself, as the async job applied them (row 2 got
  // both gradients, not their mean); the dense part: the round's mean, as
  // the sync job's.
  const std::vector<float> rows = RowsNow(*shard, hybrid, 1, ids);
  CHECK(rows == RowsNow(*all_async, async, 1, ids));
  CHECK(rows != RowsNow(*all_sync, sync, 1, ids));
  CHECK(testing::DenseState(*shard) == testing::DenseState(*all_sync));
  CHECK(testing::DenseState(*shard) != testing::DenseState(*all_async));

  proto::ShardStatus status;
  shard->GetStatus(&status);
  REQUIRE(status.tables_size() == 1);
  CHECK(status.policy() == "sync");
  CHECK(status.tables(0).policy() == "async");
}

TEST_CASE(
    "an async table's rows count once: retried, and across a restore "
    "mid-round",
    "[table_policy][checkpoint]") {
  JobConfig config = RowsJob("sync", 1, "0", "1000", kAsyncTable);
  const JobConfig reference_config = config;
  config.checkpoint.dir = testing::NewTempDir() + "/checkpoints";
  // The pushes of two rounds, by (rank, clock).
  auto push_of = [&config](const Shard& s, uint32_t rank, uint64_t clock) {
    const std::vector<uint64_t> ids =
        clock == 0 ? std::vector<uint64_t>{rank + 1u, rank + 2u}
                   : std::vector<uint64_t>{rank == 0 ? 1u : 3u, 4};
    return Push(s, config, rank, clock, 0.25f + rank + clock, ids);
  };
  const std::vector<uint64_t> ids = {1, 2, 3, 4};
  std::unique_ptr<Shard> reference = RegisteredShard(reference_config);
  proto::PushResponse r;
  for (uint64_t clock : {0, 1}) {
    for (uint32_t rank : {0u, 1u}) {
      REQUIRE(reference->Push(push_of(*reference, rank, clock), &r).ok());
    }
  }

  std::vector<float> after_rank0;
  {
    std::unique_ptr<Shard> shard = RegisteredShard(config);
    REQUIRE(shard->Push(push_of(*shard, 0, 0), &r).ok());
    after_rank0 = RowsNow(*shard, config, 1, ids);
    // Its reply lost, the push comes again: a duplicate, nothing applied.
    proto::PushResponse again;
    REQUIRE(shard->Push(push_of(*shard, 0, 0), &again).ok());
    CHECK(again.duplicate());
    CHECK(RowsNow(*shard, config, 1, ids) == after_rank0);
    // A checkpoint now holds rank 0's rows and not its dense part.
    REQUIRE(shard->CheckpointNow().ok());
  }
  std::unique_ptr<Shard> restored = *Shard::Create(config, 0);
  CHECK(restored->store().version() == 0);
  for (uint32_t rank : {0u, 1u}) {
    testing::RegisterAtZero(*restored, config.job_id, rank);
  }
  CHECK(RowsNow(*restored, config, 0, ids) == after_rank0);
  // Rank 0 sends its push of the round again (its reply never came): its
  // dense part goes into the round, its rows are not applied twice.
  proto::PushResponse retried;
  REQUIRE(restored->Push(push_of(*restored, 0, 0), &retried).ok());
  CHECK_FALSE(retried.duplicate());
  CHECK(RowsNow(*restored, config, 0, ids) == after_rank0);
  for (uint64_t clock : {0, 1}) {
    for (uint32_t rank : {0u, 1u}) {
      if (clock == 0 && rank == 0) continue;
      REQUIRE(restored->Push(push_of(*restored, rank, clock), &r).ok());
    }
  }
  CHECK(restored->store().version() == 2);
  CHECK(testing::DenseState(*restored) == testing::DenseState(*reference));
  CHECK(RowsNow(*restored, config, 2, ids) ==
        RowsNow(*reference, reference_config, 2, ids));
}

// Two tables on one store, table 0 with the job's policy and table 1
// async, under `rule`'s policy.
struct TwoTables {
  TwoTables(int workers, bool sync, bool second_async) {
    spec.tensors.push_back({"w", {4}, 4, 0.5f});
    spec.total_elements = 4;
    plan = std::make_unique<PartitionPlan>(*PartitionPlan::Build(spec, 64, 1));
    std::vector<std::unique_ptr<RowTable>> tables;
    for (uint32_t t = 0; t < 2; ++t) {
      EmbeddingTableConfig c;
      c.name = absl::StrCat("t", t);
      c.rows = 100;
      c.dim = 3;
      c.optimizer = "adagrad";
      c.learning_rate = 0.1;
      c.eps = 1e-10;
      if (t == 1 && second_async) c.policy = "async";
      tables.push_back(
          std::make_unique<RowTable>(c, t, 7, *MakeRowOptimizer(c)));
    }
    store = std::make_unique<ShardStore>(
        spec, *plan, 0, 1,
        std::make_unique<SgdOptimizer>(LearningRateSchedule::Constant(0.5f),
                                       0.0f, 0.0f, false),
        std::move(tables));
    std::unique_ptr<PolicyRule> rule;
    if (sync) {
      rule = std::make_unique<SyncRule>(workers, store.get());
    } else {
      rule = std::make_unique<StalenessRule>(
          store.get(), StalenessRule::kUnbounded, StalenessScaling::kNone);
    }
    policy =
        std::make_unique<UpdatePolicy>(workers, store.get(), std::move(rule));
  }

  // `rank`'s push at `clock` into both tables, ids {clock, clock + rank +
  // 1}, gradients distinct per rank, id and element.
  absl::Status Push(int rank, uint64_t clock) {
    ids = {clock, clock + static_cast<uint64_t>(rank) + 1};
    values.clear();
    for (uint64_t id : ids) {
      for (int e = 0; e < 3; ++e) {
        values.push_back(0.5f * static_cast<float>(rank + 1) -
                         0.25f * static_cast<float>(id) + 0.125f * e);
      }
    }
    grad.assign(4, 0.1f * static_cast<float>(rank + 1));
    std::vector<absl::Span<const float>> grads = {grad};
    const std::vector<RowGrads> rows = {{0, ids, values}, {1, ids, values}};
    return policy->Push(rank, clock, grads, rows);
  }

  std::vector<float> Rows(int table) const {
    std::vector<float> out(10 * 3);
    std::vector<uint64_t> all;
    for (uint64_t id = 0; id < 10; ++id) all.push_back(id);
    store->table(table).Read(all, out.data());
    return out;
  }

  ModelSpec spec;
  std::unique_ptr<PartitionPlan> plan;
  std::unique_ptr<ShardStore> store;
  std::unique_ptr<UpdatePolicy> policy;
  std::vector<uint64_t> ids;
  std::vector<float> values, grad;
};

TEST_CASE(
    "a sync table beside an async one: each as if the job had its "
    "policy",
    "[table_policy]") {
  TwoTables hybrid(3, /*sync=*/true, /*second_async=*/true);
  TwoTables sync(3, true, false);
  TwoTables async(3, false, false);
  for (uint64_t clock = 0; clock < 4; ++clock) {
    for (int rank : {2, 0, 1}) {
      for (TwoTables* s : {&hybrid, &sync, &async}) {
        REQUIRE(s->Push(rank, clock).ok());
      }
      // Mid-round too, the async table has taken every push so far.
      CHECK(hybrid.Rows(1) == async.Rows(1));
    }
    CHECK(hybrid.store->version() == clock + 1);
    CHECK(hybrid.Rows(0) == sync.Rows(0));
    CHECK(hybrid.Rows(1) == async.Rows(1));
    CHECK(hybrid.Rows(1) != sync.Rows(1));
  }
  // A push the round refuses (a clock it is not at) applies no rows.
  const std::vector<float> before = hybrid.Rows(1);
  CHECK(absl::IsFailedPrecondition(hybrid.Push(0, 7)));
  CHECK(hybrid.Rows(1) == before);
}

}  // namespace
}  // namespace paramd
