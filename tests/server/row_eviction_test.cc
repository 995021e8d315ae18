// Eviction of a table's rows (server/store/row_eviction.h): time to live,
// capacity under lru and lfu, and both, each against a reference model of
// the table that keeps every row's values, slots, last update and count
// and sweeps by the rules written in row_eviction.h; the rows' bookkeeping
// survives a save; a save from before the clock still restores; the
// evictor thread sweeps a table past its capacity.
#include "server/store/row_eviction.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/model/rows.h"
#include "server/optimizer/optimizer.h"
#include "server/store/row_table.h"
#include "server/store/state_bytes.h"

namespace paramd {
namespace {

constexpr uint64_t kIds = 400;
constexpr int kDim = 4;

EmbeddingTableConfig Table(const std::string& optimizer,
                           const EvictionConfig& eviction) {
  EmbeddingTableConfig t;
  t.name = "emb";
  t.rows = kIds;
  t.dim = kDim;
  t.init = "normal";
  t.init_scale = 0.1;
  t.optimizer = optimizer;
  t.learning_rate = 0.05;
  t.eps = 1e-10;
  t.eviction = eviction;
  return t;
}

std::unique_ptr<RowTable> MakeTable(const EmbeddingTableConfig& config) {
  return std::make_unique<RowTable>(config, 0, 42, *MakeRowOptimizer(config));
}

// The table as row_eviction.h describes it, one row at a time.
class Reference {
 public:
  explicit Reference(const EmbeddingTableConfig& config)
      : config_(config), optimizer_(*MakeRowOptimizer(config)) {}

  void Apply(const std::vector<uint64_t>& ids,
             const std::vector<float>& grads) {
    ++clock_;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto [it, fresh] = rows_.try_emplace(ids[i]);
      Row& row = it->second;
      if (fresh) {
        row.values.resize(kDim);
        InitRow(config_, 42, 0, ids[i], absl::MakeSpan(row.values));
        row.slots.assign(optimizer_->num_slots(),
                         std::vector<float>(kDim, 0.0f));
      }
      row.meta = RowMeta{ids[i], clock_, row.meta.count + 1};
      optimizer_->Apply(absl::MakeSpan(row.values),
                        absl::MakeConstSpan(&grads[i * kDim], kDim), 1.0f,
                        absl::MakeSpan(row.slots), clock_);
    }
    if (SweepDue(config_.eviction, clock_, last_sweep_, rows_.size())) {
      Sweep();
    }
  }

  void Sweep() {
    const EvictionConfig& e = config_.eviction;
    last_sweep_ = clock_;
    const bool over = e.capacity_rows > 0 && rows_.size() > e.capacity_rows;
    for (auto it = rows_.begin(); it != rows_.end();) {
      if (e.ttl_steps > 0 && clock_ - it->second.meta.last >= e.ttl_steps) {
        it = rows_.erase(it);
        ++evicted_;
      } else {
        ++it;
      }
    }
    if (!over || rows_.size() <= CapacityTarget(e.capacity_rows)) return;
    std::vector<std::pair<uint64_t, uint64_t>> order;  // (key, id)
    for (const auto& [id, row] : rows_) {
      order.emplace_back(e.lfu ? std::min<uint64_t>(row.meta.count, 1 << 23)
                                         << 40 |
                                     row.meta.last
                               : row.meta.last,
                         id);
    }
    std::sort(order.begin(), order.end());
    const size_t k = rows_.size() - CapacityTarget(e.capacity_rows);
    for (size_t i = 0; i < k; ++i) rows_.erase(order[i].second);
    evicted_ += k;
  }

  // Checks that `table` holds the same rows with the same values.
  void Check(const RowTable& table) const {
    REQUIRE(table.rows() == rows_.size());
    REQUIRE(table.rows_evicted() == evicted_);
    REQUIRE(table.clock() == clock_);
    for (uint64_t id = 0; id < kIds; ++id) {
      auto it = rows_.find(id);
      REQUIRE(table.Holds(id) == (it != rows_.end()));
      std::vector<float> got(kDim), want(kDim);
      table.Read({id}, got.data());
      if (it == rows_.end()) {
        InitRow(config_, 42, 0, id, absl::MakeSpan(want));
      } else {
        want = it->second.values;
      }
      INFO("row " << id);
      REQUIRE(got == want);
    }
  }

  uint64_t evicted() const { return evicted_; }

 private:
  struct Row {
    std::vector<float> values;
    std::vector<std::vector<float>> slots;
    RowMeta meta;
  };
  const EmbeddingTableConfig config_;
  std::unique_ptr<Optimizer> optimizer_;
  std::map<uint64_t, Row> rows_;
  int64_t clock_ = 0;
  int64_t last_sweep_ = 0;
  uint64_t evicted_ = 0;
};

// A step's ids: 24 draws from a power law over kIds (distinct, sorted),
// with gradients.
void Draw(std::mt19937_64* random, std::vector<uint64_t>* ids,
          std::vector<float>* grads) {
  std::uniform_real_distribution<double> u(0, 1);
  std::set<uint64_t> drawn;
  for (int i = 0; i < 24; ++i) {
    drawn.insert(
        static_cast<uint64_t>(kIds * u(*random) * u(*random) * u(*random)));
  }
  ids->assign(drawn.begin(), drawn.end());
  grads->resize(ids->size() * kDim);
  for (float& g : *grads) g = static_cast<float>(u(*random) - 0.5);
}

// Steps the table and the reference alike, sweeping the table when it asks
// (as the evictor does), and compares them after every step.
void RunAgainstReference(const EmbeddingTableConfig& config, int steps) {
  std::unique_ptr<RowTable> table = MakeTable(config);
  Reference reference(config);
  std::mt19937_64 random(11);
  std::vector<uint64_t> ids;
  std::vector<float> grads;
  for (int step = 1; step <= steps; ++step) {
    Draw(&random, &ids, &grads);
    table->Apply(ids, grads, 1.0f);
    if (table->sweep_due()) table->Sweep();
    reference.Apply(ids, grads);
    INFO("step " << step);
    reference.Check(*table);
  }
  CHECK(reference.evicted() > 0);
}

TEST_CASE("LeastRows keeps the rows first by key, then id, of all offered",
          "[row_eviction]") {
  std::mt19937_64 random(11);
  for (size_t most : {size_t{0}, size_t{1}, size_t{7}, size_t{300}}) {
    INFO(most << " kept");
    LeastRows least(most);
    std::vector<RowVictim> all;
    for (uint64_t id = 0; id < 1000; ++id) {
      const RowVictim v{random() % 50, id, false};  // Many equal keys.
      all.push_back(v);
      least.Offer(v);
    }
    std::sort(all.begin(), all.end(),
              [](const RowVictim& a, const RowVictim& b) {
                return a.key != b.key ? a.key < b.key : a.id < b.id;
              });
    const size_t k = most / 2 + 1;
    std::vector<RowVictim> taken = std::move(least).Take(k);
    CHECK(taken.size() == std::min(k, most));
    std::set<uint64_t> ids;
    for (const RowVictim& v : taken) ids.insert(v.id);
    std::set<uint64_t> expected;
    for (size_t i = 0; i < taken.size(); ++i) expected.insert(all[i].id);
    CHECK(ids == expected);
  }
}

TEST_CASE("rows not pushed for ttl_steps updates are evicted",
          "[row_eviction]") {
  EvictionConfig e;
  for (int64_t ttl : {1, 7, 16}) {
    e.ttl_steps = ttl;
    for (const std::string optimizer : {"sgd", "adagrad"}) {
      INFO("ttl_steps " << ttl << ", " << optimizer);
      RunAgainstReference(Table(optimizer, e), 120);
    }
  }
}

TEST_CASE("past its capacity a table evicts by lru or lfu", "[row_eviction]") {
  EvictionConfig e;
  e.capacity_rows = 64;
  for (bool lfu : {false, true}) {
    e.lfu = lfu;
    INFO((lfu ? "lfu" : "lru"));
    RunAgainstReference(Table("adagrad", e), 150);
  }
}

TEST_CASE("time to live and capacity together", "[row_eviction]") {
  EvictionConfig e;
  e.ttl_steps = 24;
  e.capacity_rows = 100;
  e.lfu = true;
  RunAgainstReference(Table("adagrad", e), 150);
}

TEST_CASE("an evicted row that comes back starts from its initial values",
          "[row_eviction]") {
  EvictionConfig e;
  e.ttl_steps = 1;
  const EmbeddingTableConfig config = Table("sgd", e);
  std::unique_ptr<RowTable> table = MakeTable(config);
  const std::vector<float> grad(kDim, 1.0f);
  table->Apply({5}, grad, 1.0f);
  table->Apply({6}, grad, 1.0f);
  REQUIRE(table->sweep_due());
  CHECK(table->Sweep() == 1);  // Row 5 was not in the last update.
  CHECK_FALSE(table->Holds(5));
  std::vector<float> init(kDim), got(kDim);
  InitRow(config, 42, 0, 5, absl::MakeSpan(init));
  table->Read({5}, got.data());
  CHECK(got == init);
  table->Apply({5}, grad, 1.0f);
  table->Read({5}, got.data());
  for (int j = 0; j < kDim; ++j) CHECK(got[j] == Approx(init[j] - 0.05f));
  CHECK(table->rows_evicted() == 1);
}

TEST_CASE("a saved table keeps its clock and its rows' bookkeeping",
          "[row_eviction]") {
  EvictionConfig e;
  e.ttl_steps = 10;
  e.capacity_rows = 80;
  e.lfu = true;
  const EmbeddingTableConfig config = Table("adagrad", e);
  std::unique_ptr<RowTable> a = MakeTable(config);
  std::mt19937_64 random(3);
  std::vector<uint64_t> ids;
  std::vector<float> grads;
  for (int step = 0; step < 40; ++step) {
    Draw(&random, &ids, &grads);
    a->Apply(ids, grads, 1.0f);
    if (a->sweep_due()) a->Sweep();
  }
  std::string saved;
  REQUIRE(a->Save(&saved).ok());
  std::unique_ptr<RowTable> b = MakeTable(config);
  absl::string_view in = saved;
  absl::StatusOr<RowTable::Saved> parsed = b->Parse(&in);
  REQUIRE(parsed.ok());
  CHECK(in.empty());
  b->Install(*std::move(parsed));
  CHECK(b->clock() == a->clock());
  // Going on alike: the same rows leave, so the bookkeeping came across.
  for (int step = 0; step < 60; ++step) {
    Draw(&random, &ids, &grads);
    for (RowTable* t : {a.get(), b.get()}) {
      t->Apply(ids, grads, 1.0f);
      if (t->sweep_due()) t->Sweep();
    }
    REQUIRE(a->rows() == b->rows());
    for (uint64_t id = 0; id < kIds; ++id) {
      REQUIRE(a->Holds(id) == b->Holds(id));
    }
  }
  std::string again;
  REQUIRE(b->Save(&again).ok());
  saved.clear();
  REQUIRE(a->Save(&saved).ok());
  CHECK(again == saved);
}

TEST_CASE("a save from before the clock restores, its rows as just pushed",
          "[row_eviction]") {
  EvictionConfig e;
  e.ttl_steps = 3;
  const EmbeddingTableConfig config = Table("sgd", e);
  // The PROW format: magic, table, floats per row, steps, rows, the ids,
  // then the rows.
  std::string old = "PROW";
  PutBytes(&old, uint32_t{0});
  PutBytes(&old, uint32_t{kDim});
  PutBytes(&old, int64_t{7});
  PutBytes(&old, uint64_t{2});
  PutBytes(&old, uint64_t{9});
  PutBytes(&old, uint64_t{4});
  for (int i = 0; i < 2 * kDim; ++i) PutBytes(&old, static_cast<float>(i));
  std::unique_ptr<RowTable> table = MakeTable(config);
  absl::string_view in = old;
  absl::StatusOr<RowTable::Saved> parsed = table->Parse(&in);
  REQUIRE(parsed.ok());
  table->Install(*std::move(parsed));
  CHECK(table->clock() == 7);
  CHECK(table->steps() == 7);
  std::vector<float> got(kDim);
  table->Read({4}, got.data());
  CHECK(got == std::vector<float>{4, 5, 6, 7});
  const std::vector<float> grad(kDim, 0.0f);
  table->Apply({9}, grad, 1.0f);
  table->Apply({9}, grad, 1.0f);
  if (table->sweep_due()) table->Sweep();
  CHECK(table->Holds(4));  // Taken as pushed at update 7: 2 updates ago.
  table->Apply({9}, grad, 1.0f);
  REQUIRE(table->sweep_due());
  table->Sweep();
  CHECK_FALSE(table->Holds(4));
  CHECK(table->Holds(9));
}

TEST_CASE("the evictor thread sweeps a table past its capacity",
          "[row_eviction]") {
  EvictionConfig e;
  e.capacity_rows = 100;
  std::unique_ptr<RowTable> table = MakeTable(Table("sgd", e));
  RowEvictor evictor({table.get()});
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; id < 150; ++id) ids.push_back(id);
  const std::vector<float> grads(ids.size() * kDim, 0.5f);
  table->Apply(ids, grads, 1.0f);
  REQUIRE(table->sweep_due());
  evictor.Wake();
  REQUIRE(evictor.AwaitSweeps(1, absl::Seconds(30)));
  CHECK(table->rows() == CapacityTarget(100));
  CHECK(table->rows_evicted() == 150 - CapacityTarget(100));
  CHECK_FALSE(table->sweep_due());
  // All were pushed in the same update: the smallest ids left first.
  CHECK_FALSE(table->Holds(0));
  CHECK(table->Holds(149));
}

TEST_CASE("sweeps beside concurrent pushes and reads keep the table whole",
          "[row_eviction]") {
  EvictionConfig e;
  e.ttl_steps = 40;
  e.capacity_rows = 300;
  EmbeddingTableConfig config = Table("adagrad", e);
  config.rows = 4000;
  std::unique_ptr<RowTable> table = MakeTable(config);
  auto evictor =
      std::make_unique<RowEvictor>(std::vector<RowTable*>{table.get()});
  std::atomic<bool> done{false};
  // Halfway the pusher waits for the thread's first sweep, so that one has
  // run beside the reads and the later pushes however the two threads are
  // scheduled (under load the thread may otherwise first run after both).
  bool swept_halfway = false;
  std::thread pusher([&] {
    std::mt19937_64 random(5);
    for (int step = 0; step < 1500; ++step) {
      std::set<uint64_t> drawn;
      while (drawn.size() < 16) drawn.insert(random() % 4000);
      const std::vector<uint64_t> ids(drawn.begin(), drawn.end());
      const std::vector<float> grads(ids.size() * kDim, 0.25f);
      table->Apply(ids, grads, 1.0f);
      if (table->sweep_due()) evictor->Wake();
      if (step == 750)
        swept_halfway = evictor->AwaitSweeps(1, absl::Seconds(30));
    }
    done = true;
  });
  std::mt19937_64 random(6);
  std::vector<float> row(kDim);
  uint64_t reads = 0;
  while (!done) {
    const uint64_t id = random() % 4000;
    table->Read({id}, row.data());
    (void)table->Holds(id);
    ++reads;
  }
  pusher.join();
  const uint64_t swept = evictor->sweeps();
  evictor.reset();  // Finishes its sweep.
  table->Sweep();
  INFO(swept << " sweeps by the thread, " << reads << " reads beside");
  CHECK(swept_halfway);
  CHECK(swept > 0);
  CHECK(table->rows() <= e.capacity_rows);
  CHECK(table->rows_evicted() > 0);
  // The slots and the index still agree: the save reads back whole.
  std::string saved;
  REQUIRE(table->Save(&saved).ok());
  absl::string_view in = saved;
  absl::StatusOr<RowTable::Saved> parsed = MakeTable(config)->Parse(&in);
  REQUIRE(parsed.ok());
  CHECK(parsed->rows.size() == table->rows());
  for (uint64_t id : parsed->rows.IdsBySlot()) REQUIRE(table->Holds(id));
}

}  // namespace
}  // namespace paramd
