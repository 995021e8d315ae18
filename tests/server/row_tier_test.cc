// Tables with storage (RowTable over a RowTier; docs/sparse-tables.md,
// "Rows beyond memory"): trained beside a table kept whole in memory, a
// table whose memory holds a fraction of its rows reads the same bits
// after every update — rows moved to disk come back with their optimizer
// slots and bookkeeping — and counts the same rows; a full save and the
// changes since (disk snapshots, no rows copied into memory) restore a
// table that goes on exactly like the original; exports read both tiers.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "server/store/row_table.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

constexpr uint64_t kIds = 3000;
constexpr int kDim = 4;
constexpr uint64_t kMemoryRows = 64;

EmbeddingTableConfig Table(const std::string& dir) {
  EmbeddingTableConfig t;
  t.name = "emb";
  t.rows = kIds;
  t.dim = kDim;
  t.init_scale = 0.1;
  t.optimizer = "adagrad";  // Slots: a row read back without them differs.
  t.learning_rate = 0.05;
  t.eps = 1e-10;
  if (!dir.empty()) {
    t.storage.dir = dir;
    // Less than the disk's caches (3 MiB at the least): the table keeps
    // the least a table keeps in memory, 64 rows (kMemoryRows).
    t.storage.memory_bytes = 300 * (kDim * 2 * 4 + 24 + 29);
  }
  return t;
}

std::unique_ptr<RowTable> MakeTable(const EmbeddingTableConfig& config,
                                    const std::string& dir = "") {
  auto table =
      std::make_unique<RowTable>(config, 0, 42, *MakeRowOptimizer(config));
  table->TrackChanges();
  if (!dir.empty()) REQUIRE(table->OpenStorage(dir).ok());
  return table;
}

// One update of power-law ids (a few hot rows, a long cold tail that keeps
// coming back) on every table, and a sweep of each after it.
void Update(const std::vector<RowTable*>& tables, std::mt19937_64& random) {
  std::map<uint64_t, bool> ids;
  for (int i = 0; i < 60; ++i) {
    const double u = std::uniform_real_distribution<double>(0, 1)(random);
    ids[static_cast<uint64_t>(kIds * u * u)] = true;
  }
  std::vector<uint64_t> list;
  for (const auto& [id, unused] : ids) list.push_back(id);
  std::vector<float> grads(list.size() * kDim);
  for (float& g : grads) {
    g = static_cast<float>(static_cast<int>(random() % 200) - 100) / 64;
  }
  for (RowTable* t : tables) {
    t->Apply(list, grads, 0.5f);
    if (t->sweep_due()) t->Sweep();
  }
}

std::vector<float> ReadAll(const RowTable& table) {
  std::vector<uint64_t> ids(kIds);
  for (uint64_t id = 0; id < kIds; ++id) ids[id] = id;
  std::vector<float> out(kIds * kDim);
  table.Read(ids, out.data());
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("a table on disk reads like a table in memory", "[store][tier]") {
  const std::string dir = testing::NewTempDir();
  auto memory = MakeTable(Table(""));
  auto tiered = MakeTable(Table(dir + "/emb"), dir + "/emb");
  std::mt19937_64 random(7);
  for (int step = 0; step < 400; ++step) {
    Update({memory.get(), tiered.get()}, random);
    if (step % 50 == 49) {
      REQUIRE(SameBits(ReadAll(*tiered), ReadAll(*memory)));
      REQUIRE(tiered->rows() == memory->rows());
    }
  }
  CHECK(tiered->rows_moved_out() > 1000);
  CHECK(tiered->rows_read_back() > 100);  // Cold rows came back, slots too.
  CHECK(tiered->rows_on_disk() > 1000);
  // Its memory's rows, and what one update adds before its sweep.
  CHECK(tiered->rows_in_memory() <= kMemoryRows + 60);
  CHECK(memory->rows_in_memory() > 2000);
  for (uint64_t id : {uint64_t{0}, kIds - 1}) {
    CHECK(tiered->Holds(id) == memory->Holds(id));
  }
  RowTable::Exported all, mem;
  tiered->Export(-1, &all);
  memory->Export(-1, &mem);
  REQUIRE(all.status.ok());
  std::map<uint64_t, std::vector<float>> a, m;
  for (size_t i = 0; i < all.ids.size(); ++i) {
    a[all.ids[i]].assign(&all.values[i * kDim], &all.values[(i + 1) * kDim]);
  }
  for (size_t i = 0; i < mem.ids.size(); ++i) {
    m[mem.ids[i]].assign(&mem.values[i * kDim], &mem.values[(i + 1) * kDim]);
  }
  CHECK(a == m);
  CHECK(all.ids.size() == tiered->rows());
}

TEST_CASE("a table on disk within its memory writes changed rows back",
          "[store][tier]") {
  const std::string dir = testing::NewTempDir();
  const EmbeddingTableConfig config = Table(dir + "/emb");
  REQUIRE(RowTier::MemoryRows(config.storage.memory_bytes, kDim * 2) ==
          kMemoryRows);
  auto table = MakeTable(config, dir + "/emb");
  auto push = [&](const std::vector<uint64_t>& ids) {
    table->Apply(ids, std::vector<float>(ids.size() * kDim, 0.25f), 1.0f);
  };
  // A sixteenth of its 64 rows is 4: three changed rows ask no sweep.
  push({1, 2, 3});
  CHECK_FALSE(table->sweep_due());
  push({4, 5});  // Five changed since the last sweep.
  REQUIRE(table->sweep_due());
  CHECK(table->Sweep() == 0);  // Nothing to move out: all fit.
  CHECK(table->rows_on_disk() == 5);
  CHECK(table->rows_in_memory() == 5);
  // Rows the disk holds as they are count once they are pushed again.
  push({1, 2, 3, 4});
  CHECK_FALSE(table->sweep_due());
  push({5});
  REQUIRE(table->sweep_due());
  table->Sweep();
  CHECK(table->rows_on_disk() == 5);  // Written again, counted once.
  push({6, 7, 8, 9, 10});
  REQUIRE(table->sweep_due());
  table->Sweep();
  CHECK(table->rows_on_disk() == 10);
  CHECK(table->rows_moved_out() == 0);
}

TEST_CASE("a full save of a table on disk plus its changes restores it",
          "[store][tier][incremental]") {
  const std::string dir = testing::NewTempDir();
  auto memory = MakeTable(Table(""));
  auto tiered = MakeTable(Table(dir + "/emb"), dir + "/emb");
  std::mt19937_64 random(11);
  for (int step = 0; step < 150; ++step) {
    Update({memory.get(), tiered.get()}, random);
  }
  std::string full;
  REQUIRE(tiered->Save(&full, dir + "/ckpt/emb").ok());
  // Saved into a checkpoint only: no folder, no save.
  std::string none;
  CHECK(absl::IsFailedPrecondition(tiered->Save(&none)));
  const int64_t since = tiered->clock();
  for (int step = 0; step < 150; ++step) {
    Update({memory.get(), tiered.get()}, random);
  }
  std::string changes;
  REQUIRE(tiered->SaveChanges(since, &changes, dir + "/delta/emb").ok());
  // A snapshot too (sharing the full one's unchanged files): no rows in
  // memory's bytes.
  CHECK(changes.size() < 512);
  RowTable::Exported delta;
  tiered->Export(since, &delta);
  REQUIRE(delta.status.ok());
  CHECK(delta.ids.size() < tiered->rows());

  auto restored = MakeTable(Table(dir + "/emb2"), dir + "/emb2");
  absl::string_view in(full);
  absl::StatusOr<RowTable::Saved> saved = restored->Parse(&in);
  REQUIRE(saved.ok());
  absl::string_view changes_in(changes);
  REQUIRE(restored->ParseChangesInto(&changes_in, &*saved).ok());
  restored->Install(*std::move(saved));
  REQUIRE(restored->rows() == memory->rows());
  REQUIRE(SameBits(ReadAll(*restored), ReadAll(*memory)));
  // It goes on exactly like the table kept in memory.
  for (int step = 0; step < 100; ++step) {
    Update({memory.get(), restored.get()}, random);
  }
  CHECK(SameBits(ReadAll(*restored), ReadAll(*memory)));
  CHECK(restored->rows() == memory->rows());
  // The snapshot is the checkpoint's: the restored disk is a copy of it.
  CHECK(std::filesystem::exists(dir + "/ckpt/emb/CURRENT"));

  // A snapshot that is gone is refused, naming it.
  auto other = MakeTable(Table(dir + "/emb3"), dir + "/emb3");
  std::filesystem::remove_all(dir + "/ckpt");
  absl::string_view again(full);
  absl::StatusOr<RowTable::Saved> missing = other->Parse(&again);
  REQUIRE(!missing.ok());
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains(dir + "/ckpt/emb"));
  // A table without storage cannot take rows on disk.
  auto plain = MakeTable(Table(""));
  absl::string_view plain_in(full);
  CHECK(absl::IsFailedPrecondition(plain->Parse(&plain_in).status()));
}

TEST_CASE("a table on disk restores a save of rows in memory",
          "[store][tier]") {
  const std::string dir = testing::NewTempDir();
  auto memory = MakeTable(Table(""));
  std::mt19937_64 random(3);
  for (int step = 0; step < 200; ++step) Update({memory.get()}, random);
  std::string state;
  REQUIRE(memory->Save(&state).ok());
  auto tiered = MakeTable(Table(dir + "/emb"), dir + "/emb");
  absl::string_view in(state);
  absl::StatusOr<RowTable::Saved> saved = tiered->Parse(&in);
  REQUIRE(saved.ok());
  tiered->Install(*std::move(saved));
  REQUIRE(tiered->sweep_due());  // More rows than its memory holds.
  CHECK(tiered->Sweep() > 0);
  for (int step = 0; step < 100; ++step) {
    Update({memory.get(), tiered.get()}, random);
  }
  CHECK(SameBits(ReadAll(*tiered), ReadAll(*memory)));
  CHECK(tiered->rows() == memory->rows());
}

}  // namespace
}  // namespace paramd
