// An export folder (tools/serve/model_export.h) and the model a serving
// process holds from it (tools/serve/served_model.h): exports round-trip
// exactly; a damaged or cut-short file is refused naming it; a full
// export with the incremental ones after it, applied in order, serves the
// same rows as the newest state (rows not held at their initial values);
// a refresh takes exports as they land, a new full one replaces the
// model, and one that does not follow is refused until a full one comes.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/model/rows.h"
#include "server/checkpoint/file_system.h"
#include "tests/test_files.h"
#include "tools/serve/model_export.h"
#include "tools/serve/served_model.h"

namespace paramd {
namespace {

constexpr int kDim = 3;

EmbeddingTableConfig Table() {
  EmbeddingTableConfig t;
  t.name = "users";
  t.dim = kDim;
  t.rows = 100;
  t.init = "normal";
  t.init_scale = 0.1;
  return t;
}

// An export of table "users" holding `rows` (id -> first value; the
// others follow it), with tensor "w" of value `w`.
ModelExport Export(uint64_t sequence, uint64_t base,
                   const std::map<uint64_t, float>& rows,
                   const std::vector<uint64_t>& dropped = {}, float w = 1) {
  ModelExport m;
  m.sequence = sequence;
  m.incremental = base > 0;
  m.base = base;
  m.job_id = "serve-job";
  m.seed = 9;
  m.versions = {10 * sequence, 10 * sequence + 1};
  m.since = {base > 0 ? 10 * base : 0, base > 0 ? 10 * base + 1 : 0};
  m.tensors.push_back(ExportedTensor{"w", {2, 2}, {w, w + 1, w + 2, w + 3}});
  ExportedTable t;
  t.index = 0;
  t.config = Table();
  for (const auto& [id, v] : rows) {
    t.ids.push_back(id);
    for (int e = 0; e < kDim; ++e) t.values.push_back(v + e);
  }
  t.dropped = dropped;
  m.tables.push_back(std::move(t));
  return m;
}

std::vector<float> Row(float first) { return {first, first + 1, first + 2}; }

std::vector<float> Init(uint64_t id) {
  std::vector<float> row(kDim);
  InitRow(Table(), 9, 0, id, absl::MakeSpan(row));
  return row;
}

std::vector<float> Lookup(const ServedModel& model, uint64_t id) {
  std::vector<float> out;
  const uint64_t ids[] = {id};
  REQUIRE(model.Lookup("users", ids, &out).ok());
  return out;
}

TEST_CASE("an export round-trips exactly; damage is refused naming the file",
          "[serve][export]") {
  FileSystem* fs = LocalFileSystem();
  const std::string dir = testing::NewTempDir() + "/exports";
  const ModelExport full = Export(1, 0, {{3, 0.5f}, {7, 1.5f}});
  auto path = WriteModelExport(fs, dir, full);
  REQUIRE(path.ok());
  CHECK(absl::EndsWith(*path, "/export-000001.manifest"));
  auto read = ReadModelExport(fs, *path);
  REQUIRE(read.ok());
  CHECK(read->sequence == 1);
  CHECK_FALSE(read->incremental);
  CHECK(read->job_id == "serve-job");
  CHECK(read->versions == full.versions);
  CHECK(read->tensors[0].values == full.tensors[0].values);
  CHECK(read->tensors[0].shape == std::vector<int64_t>{2, 2});
  CHECK(read->tables[0].ids == full.tables[0].ids);
  CHECK(read->tables[0].values == full.tables[0].values);
  CHECK(read->tables[0].config.init_scale == Approx(0.1));
  // The same sequence again is refused.
  CHECK(absl::IsAlreadyExists(WriteModelExport(fs, dir, full).status()));

  const ModelExport delta = Export(2, 1, {{7, 9.0f}}, {3});
  REQUIRE(WriteModelExport(fs, dir, delta).ok());
  auto listed = ListExports(fs, dir);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[1].incremental);
  CHECK((*listed)[1].base == 1);
  auto read_delta = ReadModelExport(fs, (*listed)[1].manifest);
  REQUIRE(read_delta.ok());
  CHECK(read_delta->tables[0].dropped == std::vector<uint64_t>{3});

  // A flipped byte in the rows, and a manifest cut short.
  const std::string rows = dir + "/export-000001.table-0.rows";
  std::string bytes = *fs->ReadFile(rows);
  bytes[9] ^= 0x10;
  REQUIRE(fs->WriteFileSynced(rows, bytes).ok());
  auto damaged = ReadModelExport(fs, *path);
  CHECK(absl::IsDataLoss(damaged.status()));
  CHECK(absl::StrContains(damaged.status().message(), rows));
  std::string manifest = *fs->ReadFile((*listed)[1].manifest);
  REQUIRE(fs->WriteFileSynced((*listed)[1].manifest,
                              manifest.substr(0, manifest.size() / 2))
              .ok());
  auto cut = ListExports(fs, dir);
  CHECK(absl::IsDataLoss(cut.status()));
}

TEST_CASE("a served model applies incremental exports in order and picks up "
          "new ones as they land",
          "[serve][export]") {
  FileSystem* fs = LocalFileSystem();
  const std::string dir = testing::NewTempDir() + "/exports";
  CHECK(absl::IsNotFound(ServedModel::Load(fs, dir).status()));
  REQUIRE(WriteModelExport(fs, dir, Export(1, 0, {{3, 0.5f}, {7, 1.5f}})).ok());
  REQUIRE(WriteModelExport(fs, dir, Export(2, 1, {{7, 9.0f}, {8, 4.0f}}, {3}))
              .ok());
  auto model = ServedModel::Load(fs, dir);
  REQUIRE(model.ok());
  const ServedModel& m = **model;
  CHECK(m.sequence() == 2);
  CHECK(Lookup(m, 7) == Row(9.0f));
  CHECK(Lookup(m, 8) == Row(4.0f));
  CHECK(Lookup(m, 3) == Init(3));  // Dropped: its initial value again.
  CHECK(Lookup(m, 50) == Init(50));
  CHECK(m.rows().at("users") == 2);
  std::vector<int64_t> shape;
  std::vector<float> w;
  REQUIRE(m.Tensor("w", &shape, &w).ok());
  CHECK(w == std::vector<float>{1, 2, 3, 4});

  // Bad reads name what is wrong.
  std::vector<float> out;
  const uint64_t far[] = {100};
  auto s = m.Lookup("users", far, &out);
  CHECK(absl::IsInvalidArgument(s.status()));
  CHECK(absl::StrContains(s.status().message(), "id 100 of table 'users'"));
  CHECK(absl::IsNotFound(m.Lookup("items", far, &out).status()));
  CHECK(absl::IsNotFound(m.Tensor("v", &shape, &w).status()));

  // An incremental export lands: taken by the next refresh.
  REQUIRE(WriteModelExport(fs, dir, Export(3, 2, {{3, 2.0f}}, {}, 5)).ok());
  CHECK(*(*model)->Refresh() == 1);
  CHECK(m.sequence() == 3);
  CHECK(Lookup(m, 3) == Row(2.0f));
  REQUIRE(m.Tensor("w", &shape, &w).ok());
  CHECK(w[0] == 5);
  CHECK(*(*model)->Refresh() == 0);

  // One that follows another export is refused, and the model stays.
  REQUIRE(WriteModelExport(fs, dir, Export(4, 2, {{9, 1.0f}})).ok());
  auto refused = (*model)->Refresh();
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(absl::StrContains(refused.status().message(),
                          "export 4 follows export 2; the model holds "
                          "export 3"));
  CHECK(m.sequence() == 3);
  // A new full export replaces the model.
  REQUIRE(WriteModelExport(fs, dir, Export(5, 0, {{1, 7.0f}})).ok());
  CHECK(*(*model)->Refresh() == 1);
  CHECK(m.sequence() == 5);
  CHECK(Lookup(m, 1) == Row(7.0f));
  CHECK(Lookup(m, 7) == Init(7));
}

}  // namespace
}  // namespace paramd
