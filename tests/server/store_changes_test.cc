// Incremental saves of a shard's state (RowTable::SaveChanges,
// ShardStore::SaveChanges): a full save plus the changes since it restores
// the same rows, slots, bookkeeping and dense part as a full save made at
// the end — with admission, TTL and capacity eviction sweeping in between —
// and continues exactly like the original; only the changed rows are in
// the changes; changes on another base, or damaged, are refused.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "server/store/row_table.h"
#include "server/store/shard_store.h"

namespace paramd {
namespace {

constexpr uint64_t kIds = 500;
constexpr int kDim = 4;

EmbeddingTableConfig Table(const std::string& optimizer, bool evict,
                           bool admit) {
  EmbeddingTableConfig t;
  t.name = "emb";
  t.rows = kIds;
  t.dim = kDim;
  t.init = "normal";
  t.init_scale = 0.1;
  t.optimizer = optimizer;
  t.learning_rate = 0.05;
  t.eps = 1e-10;
  if (evict) {
    t.eviction.ttl_steps = 12;
    t.eviction.capacity_rows = 150;
    t.eviction.lfu = true;
  }
  if (admit) t.admission.min_count = 2;
  return t;
}

std::unique_ptr<RowTable> MakeTable(const EmbeddingTableConfig& config,
                                    bool track = true) {
  auto table =
      std::make_unique<RowTable>(config, 0, 42, *MakeRowOptimizer(config));
  if (track) table->TrackChanges();
  return table;
}

// One update of power-law ids (some rows often, most rarely) with
// gradients from `random`; a sweep after every fifth.
void Update(RowTable& table, std::mt19937_64& random, int step) {
  std::map<uint64_t, bool> ids;
  for (int i = 0; i < 40; ++i) {
    const double u = std::uniform_real_distribution<double>(0, 1)(random);
    ids[static_cast<uint64_t>(kIds * u * u * u)] = true;
  }
  std::vector<uint64_t> list;
  for (const auto& [id, unused] : ids) list.push_back(id);
  std::vector<float> grads(list.size() * kDim);
  for (float& g : grads) {
    g = static_cast<float>(static_cast<int>(random() % 200) - 100) / 64;
  }
  table.Apply(list, grads, 0.5f);
  if (step % 5 == 0) table.Sweep();
}

// Everything a table holds, by id: values and slots, last update, count.
using Rows =
    std::map<uint64_t, std::tuple<std::vector<float>, int64_t, uint32_t>>;
struct Contents {
  Rows rows;
  int64_t steps = 0;
  int64_t clock = 0;
};

Contents Of(const RowTable& table, const RowTable::Saved& saved,
            size_t stride) {
  Contents c;
  c.steps = saved.steps;
  c.clock = saved.clock;
  const std::vector<uint64_t> ids = saved.rows.IdsBySlot();
  for (uint32_t slot = 0; slot < saved.rows.size(); ++slot) {
    const float* row = saved.rows.Row(slot);
    const RowMeta m =
        saved.rows.keeps_meta() ? saved.rows.meta(slot) : RowMeta{};
    c.rows[ids[slot]] = {std::vector<float>(row, row + stride), m.last,
                         m.count};
  }
  return c;
}

Contents Of(RowTable& table, size_t stride) {
  std::string bytes;
  REQUIRE(table.Save(&bytes).ok());
  absl::string_view in(bytes);
  auto saved = table.Parse(&in);
  REQUIRE(saved.ok());
  return Of(table, *saved, stride);
}

TEST_CASE("a full save plus its changes equals a full save at the end",
          "[store][incremental]") {
  for (const std::string optimizer : {"sgd", "adagrad", "adam"}) {
    for (const bool evict : {false, true}) {
      for (const bool admit : {false, true}) {
        INFO(optimizer << " eviction " << evict << " admission " << admit);
        const EmbeddingTableConfig config = Table(optimizer, evict, admit);
        const size_t stride =
            kDim * (1 + (*MakeRowOptimizer(config))->num_slots());
        auto table = MakeTable(config);
        std::mt19937_64 random(11);
        for (int step = 1; step <= 29; ++step) Update(*table, random, step);
        // Rows dropped at the full save's update are in the changes too.
        const uint64_t evicted_before = table->rows_evicted();
        Update(*table, random, 30);
        std::string full;
        REQUIRE(table->Save(&full).ok());
        const int64_t since = table->clock();
        const Contents before = Of(*table, stride);
        // Fewer updates than before: most rows do not change.
        for (int step = 31; step <= 35; ++step) Update(*table, random, step);
        std::string changes;
        REQUIRE(table->SaveChanges(since, &changes).ok());
        const Contents after = Of(*table, stride);

        // Only rows pushed since are in the changes.
        size_t changed = 0;
        for (const auto& [id, row] : after.rows) {
          auto it = before.rows.find(id);
          if (it == before.rows.end() || it->second != row) ++changed;
        }
        // A header of 52 bytes, 8 a dropped row, each changed row whole.
        const size_t row_bytes = 8 + stride * 4 + 12;
        REQUIRE(changes.size() >= 52 + changed * row_bytes);
        const size_t dropped = changes.size() - 52 - changed * row_bytes;
        CHECK(dropped % 8 == 0);
        CHECK(dropped / 8 <= table->rows_evicted() - evicted_before);
        CHECK(changes.size() < full.size());

        auto restored = MakeTable(config);
        absl::string_view in(full);
        auto saved = restored->Parse(&in);
        REQUIRE(saved.ok());
        absl::string_view delta(changes);
        REQUIRE(restored->ParseChangesInto(&delta, &*saved).ok());
        CHECK(delta.empty());
        const Contents merged = Of(*restored, *saved, stride);
        CHECK(merged.rows == after.rows);
        CHECK(merged.steps == after.steps);
        CHECK(merged.clock == after.clock);
        if (evict) CHECK(table->rows_evicted() > 0);

        // Installed, it goes on exactly like the original (admission's
        // counts are not saved, full or incremental: row_admission.h).
        restored->Install(*std::move(saved));
        if (admit) continue;
        std::mt19937_64 a(5), b(5);
        for (int step = 36; step <= 50; ++step) {
          Update(*table, a, step);
          Update(*restored, b, step);
        }
        CHECK(Of(*restored, stride).rows == Of(*table, stride).rows);
      }
    }
  }
}

TEST_CASE("changes hold a dropped row's id until a full save forgets it",
          "[store][incremental]") {
  const EmbeddingTableConfig config = Table("sgd", true, false);
  auto table = MakeTable(config);
  std::mt19937_64 random(3);
  for (int step = 1; step <= 40; ++step) Update(*table, random, step);
  REQUIRE(table->rows_evicted() > 0);
  CHECK(table->removed_held() == table->rows_evicted());
  table->ForgetRemovedBefore(table->clock());
  // Dropped at the newest update's clock: kept (a save may race a sweep).
  CHECK(table->removed_held() <= table->rows_evicted());
  table->ForgetRemovedBefore(table->clock() + 1);
  CHECK(table->removed_held() == 0);
  // Without tracking nothing is held.
  auto untracked = MakeTable(config, /*track=*/false);
  for (int step = 1; step <= 40; ++step) Update(*untracked, random, step);
  CHECK(untracked->rows_evicted() > 0);
  CHECK(untracked->removed_held() == 0);
}

TEST_CASE("changes on another state, or damaged, are refused",
          "[store][incremental]") {
  const EmbeddingTableConfig config = Table("adagrad", false, false);
  auto table = MakeTable(config);
  std::mt19937_64 random(9);
  for (int step = 1; step <= 10; ++step) Update(*table, random, step);
  std::string full;
  REQUIRE(table->Save(&full).ok());
  const int64_t since = table->clock();
  for (int step = 11; step <= 20; ++step) Update(*table, random, step);
  std::string changes;
  REQUIRE(table->SaveChanges(since - 1, &changes)
              .ok());  // Not the full save's clock.
  absl::string_view in(full);
  auto saved = table->Parse(&in);
  REQUIRE(saved.ok());
  absl::string_view delta(changes);
  absl::Status s = table->ParseChangesInto(&delta, &*saved);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(absl::StrContains(s.message(), "do not follow a state at update 10"));

  changes.clear();
  REQUIRE(table->SaveChanges(since, &changes).ok());
  for (size_t cut : {size_t{3}, size_t{30}, changes.size() - 1}) {
    INFO("cut at " << cut);
    absl::string_view part(changes.data(), cut);
    in = full;
    auto fresh = table->Parse(&in);
    REQUIRE(fresh.ok());
    CHECK(absl::IsDataLoss(table->ParseChangesInto(&part, &*fresh)));
  }
}

TEST_CASE(
    "a store restored from a full state and its changes goes on "
    "exactly like the original",
    "[store][incremental]") {
  ModelSpec spec;
  spec.tensors.push_back({"w", {300}, 300, 0.5f});
  spec.total_elements = 300;
  const PartitionPlan plan = *PartitionPlan::Build(spec, 256, 1);
  const EmbeddingTableConfig config = Table("adam", false, false);
  auto make = [&] {
    OptimizerConfig c;
    c.type = "adam";
    c.learning_rate = 0.01;
    c.eps = 1e-8;
    std::vector<std::unique_ptr<RowTable>> tables;
    tables.push_back(MakeTable(config, /*track=*/false));
    auto store = std::make_unique<ShardStore>(
        spec, plan, 0, 3, *MakeOptimizer(c), std::move(tables));
    store->TrackChanges();
    return store;
  };
  std::mt19937_64 random(21);
  auto step = [&](ShardStore& store, int t) {
    std::vector<std::vector<float>> g;
    std::vector<absl::Span<const float>> views;
    for (int i = 0; i < store.num_chunks(); ++i) {
      g.emplace_back(store.chunk_spec(i).length, 0.1f * t - 0.3f * i);
    }
    for (const auto& v : g) views.emplace_back(v);
    std::map<uint64_t, bool> ids;
    for (int i = 0; i < 30; ++i) ids[random() % kIds] = true;
    std::vector<uint64_t> list;
    for (const auto& [id, unused] : ids) list.push_back(id);
    std::vector<float> grads(list.size() * kDim, 0.01f * t);
    RowGrads rows{0, list, grads};
    store.ApplyStep(views, 1.0f, {&rows, 1});
  };
  auto original = make();
  REQUIRE(original->tracks_changes());
  for (int t = 1; t <= 10; ++t) step(*original, t);
  std::string full;
  REQUIRE(original->SaveState(&full).ok());
  const std::vector<int64_t> clocks = original->TableClocks();
  for (int t = 11; t <= 25; ++t) step(*original, t);
  std::string changes, end;
  REQUIRE(original->SaveChanges(clocks, &changes).ok());
  REQUIRE(original->SaveState(&end).ok());
  CHECK(changes.size() < end.size());

  auto restored = make();
  REQUIRE(restored->RestoreState(full, changes).ok());
  CHECK(restored->version() == original->version());
  auto from_end = make();
  REQUIRE(from_end->RestoreState(end).ok());
  std::vector<uint64_t> all(kIds);
  for (uint64_t id = 0; id < kIds; ++id) all[id] = id;
  auto read = [&](const ShardStore& store) {
    std::vector<float> rows(kIds * kDim);
    store.table(0).Read(all, rows.data());
    std::vector<float> dense;
    store.Read([&](uint64_t, absl::Span<const std::vector<float>> chunks) {
      for (const auto& c : chunks)
        dense.insert(dense.end(), c.begin(), c.end());
    });
    return std::make_tuple(rows, dense, store.table(0).rows(),
                           store.table(0).steps());
  };
  CHECK(read(*restored) == read(*original));
  CHECK(read(*from_end) == read(*original));
  // Both continue as the original does.
  std::mt19937_64 saved_random = random;
  for (int t = 26; t <= 30; ++t) step(*original, t);
  random = saved_random;
  for (int t = 26; t <= 30; ++t) step(*restored, t);
  CHECK(read(*restored) == read(*original));

  // Changes on a state they do not follow change nothing.
  auto other = make();
  const std::string before = [&] {
    std::string s;
    REQUIRE(other->SaveState(&s).ok());
    return s;
  }();
  absl::Status s = other->RestoreState(end, changes);
  CHECK(absl::IsFailedPrecondition(s));
  std::string after;
  REQUIRE(other->SaveState(&after).ok());
  CHECK(after == before);
}

}  // namespace
}  // namespace paramd
