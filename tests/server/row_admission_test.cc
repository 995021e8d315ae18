// RowAdmission (server/store/row_admission.h) inside RowTable: an id not
// held becomes a row on its min_count-th update, against a reference that
// counts exactly; until then it reads its initial values, takes no memory
// and its gradients are dropped (counted); admission by probability takes
// its share of ids, the same ids for the same seed; the sketch never
// counts low, even when ids collide.
#include "server/store/row_admission.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "common/model/rows.h"
#include "server/store/row_table.h"

namespace paramd {
namespace {

EmbeddingTableConfig SgdTable(AdmissionConfig admission) {
  EmbeddingTableConfig t;
  t.name = "emb";
  t.rows = uint64_t{1} << 40;
  t.dim = 4;
  t.init = "normal";
  t.init_scale = 0.1;
  t.optimizer = "sgd";
  t.learning_rate = 0.5;
  t.admission = admission;
  return t;
}

std::unique_ptr<RowTable> MakeTable(const EmbeddingTableConfig& config,
                                    uint64_t seed = 42) {
  return std::make_unique<RowTable>(config, 0, seed, *MakeRowOptimizer(config));
}

std::vector<float> InitialRow(const EmbeddingTableConfig& config, uint64_t id) {
  std::vector<float> row(config.dim);
  InitRow(config, 42, 0, id, absl::MakeSpan(row));
  return row;
}

std::vector<float> ReadRow(const RowTable& table, uint64_t id) {
  std::vector<float> row(table.dim());
  const uint64_t ids[] = {id};
  table.Read(ids, row.data());
  return row;
}

TEST_CASE("an id becomes a row on its min_count-th update, not before",
          "[row_admission]") {
  AdmissionConfig admission;
  admission.min_count = 3;
  const EmbeddingTableConfig config = SgdTable(admission);
  std::unique_ptr<RowTable> table = MakeTable(config);
  const std::vector<float> grad = {1, 2, 3, 4};
  const uint64_t ids[] = {7};
  for (int update = 1; update <= 2; ++update) {
    table->Apply(ids, grad, 1.0f);
    CHECK_FALSE(table->Holds(7));
    CHECK(table->rows() == 0);
    CHECK(ReadRow(*table, 7) == InitialRow(config, 7));
  }
  CHECK(table->rows_not_admitted() == 2);
  CHECK(table->steps() == 0);  // No row stepped yet.
  table->Apply(ids, grad, 1.0f);
  REQUIRE(table->Holds(7));
  // One SGD step from the initial values: the dropped gradients left none.
  std::vector<float> want = InitialRow(config, 7);
  for (int j = 0; j < 4; ++j) want[j] -= 0.5f * grad[j];
  CHECK(ReadRow(*table, 7) == want);
  CHECK(table->rows_not_admitted() == 2);
  CHECK(table->steps() == 1);
}

TEST_CASE("admission by count matches a reference that counts exactly",
          "[row_admission]") {
  AdmissionConfig admission;
  admission.min_count = 2;
  const EmbeddingTableConfig config = SgdTable(admission);
  std::unique_ptr<RowTable> table = MakeTable(config);
  // The reference: exact counts, and each admitted row's values.
  std::map<uint64_t, int> counts;
  std::map<uint64_t, std::vector<float>> rows;
  uint64_t dropped = 0;
  std::mt19937_64 random(3);
  for (int step = 0; step < 200; ++step) {
    // Distinct ids, mostly rare ones: a power law over 3,000.
    std::map<uint64_t, bool> chosen;
    for (int k = 0; k < 40; ++k) {
      const double u = std::uniform_real_distribution<double>(0, 1)(random);
      chosen[static_cast<uint64_t>(3000 * u * u * u) * 1000003] = true;
    }
    std::vector<uint64_t> ids;
    std::vector<float> grads;
    for (const auto& [id, unused] : chosen) {
      ids.push_back(id);
      for (int j = 0; j < 4; ++j) grads.push_back(float(random() % 7) - 3);
    }
    table->Apply(ids, grads, 1.0f);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (++counts[ids[i]] < 2 && !rows.count(ids[i])) {
        ++dropped;
        continue;
      }
      auto [it, added] = rows.emplace(ids[i], InitialRow(config, ids[i]));
      for (int j = 0; j < 4; ++j) it->second[j] -= 0.5f * grads[i * 4 + j];
    }
  }
  CHECK(table->rows() == rows.size());
  CHECK(table->rows_not_admitted() == dropped);
  CHECK(dropped > 100);  // The workload has ids seen once.
  for (const auto& [id, count] : counts) {
    INFO("id " << id << " seen " << count << " time(s)");
    REQUIRE(table->Holds(id) == (count >= 2));
    if (count >= 2) CHECK(ReadRow(*table, id) == rows[id]);
    if (count < 2) CHECK(ReadRow(*table, id) == InitialRow(config, id));
  }
}

TEST_CASE("the sketch never counts low, even when ids collide",
          "[row_admission]") {
  AdmissionConfig config;
  config.min_count = 255;
  config.sketch_mib = 1;  // 262,144 counters a row: collisions certain.
  RowAdmission admission(config, 0, 1);
  std::map<uint64_t, int> counts;
  std::mt19937_64 random(11);
  for (int k = 0; k < 600000; ++k) {
    const uint64_t id = random() % 200000;
    ++counts[id];
    admission.Admit(id, k);
  }
  int over = 0;
  for (const auto& [id, count] : counts) {
    REQUIRE(admission.Count(id) >= std::min(count, 255));
    if (admission.Count(id) > count) ++over;
  }
  CHECK(over > 0);  // It did collide.
  // Saturated at 255: admitted from then on.
  for (int k = 0; k < 300; ++k) admission.Admit(5, k);
  CHECK(admission.Count(5) == 255);
  CHECK(admission.Admit(5, 301));
}

TEST_CASE("admission by probability takes its share, the same for a seed",
          "[row_admission]") {
  AdmissionConfig admission;
  admission.probability = 0.25;
  const EmbeddingTableConfig config = SgdTable(admission);
  std::unique_ptr<RowTable> a = MakeTable(config);
  std::unique_ptr<RowTable> b = MakeTable(config);
  std::unique_ptr<RowTable> other_seed = MakeTable(config, 43);
  std::vector<uint64_t> ids(20000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i * 7919;
  const std::vector<float> grads(ids.size() * 4, 1.0f);
  for (RowTable* t : {a.get(), b.get(), other_seed.get()}) {
    t->Apply(ids, grads, 1.0f);
  }
  CHECK(a->rows() > 4700);
  CHECK(a->rows() < 5300);
  CHECK(a->rows() + a->rows_not_admitted() == ids.size());
  int same = 0, same_other = 0;
  for (uint64_t id : ids) {
    same += a->Holds(id) == b->Holds(id);
    same_other += a->Holds(id) == other_seed->Holds(id);
  }
  CHECK(same == static_cast<int>(ids.size()));
  CHECK(same_other < static_cast<int>(ids.size()));
  // At the next update each id not held draws again.
  a->Apply(ids, grads, 1.0f);
  CHECK(a->rows() > 8400);  // 1 - 0.75^2 of them: 8,750.
  CHECK(a->rows() < 9100);
}

}  // namespace
}  // namespace paramd
