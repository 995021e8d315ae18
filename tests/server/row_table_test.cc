// RowTable (server/store/row_table.h): sparse SGD, Adagrad and lazy Adam on
// rows equal the dense optimizer's update of the same rows, bit for bit; rows
// not pushed keep their initial values and take no memory; a saved table
// restores exactly, and a damaged save changes nothing.
#include "server/store/row_table.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "common/model/rows.h"
#include "server/optimizer/optimizer.h"

namespace paramd {
namespace {

EmbeddingTableConfig Table(const std::string& optimizer) {
  EmbeddingTableConfig t;
  t.name = "emb";
  t.rows = 1000;
  t.dim = 8;
  t.init = "normal";
  t.init_scale = 0.1;
  t.optimizer = optimizer;
  t.learning_rate = 0.05;
  t.eps = optimizer == "adagrad" ? 1e-10 : 1e-8;
  return t;
}

std::unique_ptr<RowTable> MakeTable(const EmbeddingTableConfig& config) {
  return std::make_unique<RowTable>(config, 1, 42, *MakeRowOptimizer(config));
}

// The dense reference: every row touched so far as its own vector and
// slots, stepped by the dense optimizer over the rows of each step.
struct DenseRows {
  std::map<uint64_t, std::vector<float>> params;
  std::map<uint64_t, std::vector<std::vector<float>>> slots;
};

TEST_CASE("sparse row updates equal the dense update of those rows",
          "[row_table]") {
  for (const std::string optimizer : {"sgd", "adagrad", "adam"}) {
    SECTION(optimizer) {
      const EmbeddingTableConfig config = Table(optimizer);
      std::unique_ptr<RowTable> table = MakeTable(config);
      std::unique_ptr<Optimizer> dense = *MakeRowOptimizer(config);
      DenseRows reference;
      std::mt19937_64 random(7);
      const int dim = config.dim;
      for (int step = 1; step <= 30; ++step) {
        // A random sorted set of rows out of the first 60, with gradients.
        std::vector<uint64_t> ids;
        for (uint64_t id = 0; id < 60; ++id) {
          if (random() % 4 == 0) ids.push_back(id);
        }
        std::vector<float> grads(ids.size() * dim);
        for (float& g : grads) {
          g = static_cast<float>(static_cast<int>(random() % 200) - 100) / 64;
        }
        table->Apply(ids, grads, 0.5f);
        // Dense: gather the same rows, one optimizer step, scatter back.
        std::vector<float> params;
        std::vector<std::vector<float>> slots(dense->num_slots());
        for (uint64_t id : ids) {
          if (!reference.params.count(id)) {
            std::vector<float> init(dim);
            InitRow(config, 42, 1, id, absl::MakeSpan(init));
            reference.params[id] = init;
            reference.slots[id].assign(dense->num_slots(),
                                       std::vector<float>(dim, 0.0f));
          }
          params.insert(params.end(), reference.params[id].begin(),
                        reference.params[id].end());
          for (int s = 0; s < dense->num_slots(); ++s) {
            slots[s].insert(slots[s].end(), reference.slots[id][s].begin(),
                            reference.slots[id][s].end());
          }
        }
        dense->Apply(absl::MakeSpan(params), grads, 0.5f, absl::MakeSpan(slots),
                     step);
        for (size_t i = 0; i < ids.size(); ++i) {
          std::copy(params.begin() + i * dim, params.begin() + (i + 1) * dim,
                    reference.params[ids[i]].begin());
          for (int s = 0; s < dense->num_slots(); ++s) {
            std::copy(slots[s].begin() + i * dim,
                      slots[s].begin() + (i + 1) * dim,
                      reference.slots[ids[i]][s].begin());
          }
        }
      }
      CHECK(table->steps() == 30);
      CHECK(table->rows() == reference.params.size());
      // Every row of the table, touched or not, read back.
      std::vector<uint64_t> all(config.rows);
      for (uint64_t id = 0; id < config.rows; ++id) all[id] = id;
      std::vector<float> read(all.size() * dim);
      table->Read(all, read.data());
      std::vector<float> init(dim);
      for (uint64_t id = 0; id < config.rows; ++id) {
        const float* got = &read[id * dim];
        auto it = reference.params.find(id);
        if (it == reference.params.end()) {
          InitRow(config, 42, 1, id, absl::MakeSpan(init));
          INFO("untouched row " << id);
          CHECK(std::memcmp(got, init.data(), dim * 4) == 0);
        } else {
          INFO("row " << id);
          CHECK(std::memcmp(got, it->second.data(), dim * 4) == 0);
        }
      }
      // Memory: slabs of 4096 rows of dim × (1 + slots) floats and the
      // index; untouched rows take none.
      const uint64_t stride = dim * (1 + dense->num_slots());
      CHECK(table->bytes() >= RowTable::kSlabRows * stride * 4);
      CHECK(table->bytes() < RowTable::kSlabRows * stride * 4 + 4096);
    }
  }
}

TEST_CASE("a saved table restores exactly; a damaged save changes nothing",
          "[row_table]") {
  const EmbeddingTableConfig config = Table("adam");
  std::unique_ptr<RowTable> table = MakeTable(config);
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < config.rows; id += 3) ids.push_back(id);
  std::vector<float> grads(ids.size() * config.dim, 0.25f);
  table->Apply(ids, grads, 1.0f);
  table->Apply(ids, grads, 1.0f);
  std::string saved;
  REQUIRE(table->Save(&saved).ok());

  std::unique_ptr<RowTable> copy = MakeTable(config);
  absl::string_view in = saved;
  absl::StatusOr<RowTable::Saved> parsed = copy->Parse(&in);
  REQUIRE(parsed.ok());
  CHECK(in.empty());
  copy->Install(std::move(*parsed));
  CHECK(copy->rows() == table->rows());
  CHECK(copy->steps() == 2);
  std::vector<float> a(ids.size() * config.dim), b(a.size());
  table->Read(ids, a.data());
  copy->Read(ids, b.data());
  CHECK(a == b);
  // The next step continues identically (slots and step count restored).
  table->Apply(ids, grads, 1.0f);
  copy->Apply(ids, grads, 1.0f);
  table->Read(ids, a.data());
  copy->Read(ids, b.data());
  CHECK(a == b);

  // Truncated, or of another table: refused, nothing installed.
  std::unique_ptr<RowTable> fresh = MakeTable(config);
  absl::string_view cut = absl::string_view(saved).substr(0, saved.size() - 1);
  absl::StatusOr<RowTable::Saved> bad = fresh->Parse(&cut);
  CHECK(bad.status().code() == absl::StatusCode::kDataLoss);
  EmbeddingTableConfig other = config;
  other.dim = 4;
  std::unique_ptr<RowTable> narrow = MakeTable(other);
  absl::string_view whole = saved;
  bad = narrow->Parse(&whole);
  CHECK(bad.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(bad.status().message(), "table 'emb'"));
  CHECK(fresh->rows() == 0);
}

}  // namespace
}  // namespace paramd
