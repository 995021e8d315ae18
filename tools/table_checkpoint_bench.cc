// table_checkpoint_bench: what a checkpoint of an embedding table costs,
// full against incremental (checkpoint.full_every). A shard's store holds
// one table of --rows rows (dim --dim, Adagrad: values and one slot a
// row) and tracks changes; then --steps steps each push --touch rows
// (power-law: most pushes land on few rows, a tenth of them new). Printed:
// the capture a push makes under the policy's lock (ShardStore::SaveState
// against SaveChanges since the full one), its bytes, the write off the
// push's path (encode with CRC, write, fsync, rename: Checkpointer::Save)
// and the restore (RestoreState of the full state, against the full state
// plus the changes).
//
//   bazel run -c opt //tools:table_checkpoint_bench -- [--rows N] [--dim D]
//       [--touch K] [--steps S] [--dir DIR]
//
// DIR (default out/table-checkpoint-bench in the workspace) should be on
// the disk checkpoints would use.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/model/partitioner.h"
#include "server/checkpoint/checkpointer.h"
#include "server/optimizer/optimizer.h"
#include "server/store/shard_store.h"

namespace paramd {
namespace {

struct Setup {
  uint64_t rows = 2000000;
  int dim = 16;
  uint64_t touch = 20000;
  int steps = 10;
};

std::unique_ptr<ShardStore> MakeStore(const Setup& s, const ModelSpec& spec,
                                      const PartitionPlan& plan) {
  EmbeddingTableConfig t;
  t.name = "emb";
  t.rows = uint64_t{1} << 40;
  t.dim = s.dim;
  t.optimizer = "adagrad";
  t.learning_rate = 0.05;
  t.eps = 1e-10;
  std::vector<std::unique_ptr<RowTable>> tables;
  tables.push_back(std::make_unique<RowTable>(t, 0, 1, *MakeRowOptimizer(t)));
  OptimizerConfig dense;
  dense.type = "adagrad";
  dense.learning_rate = 0.05;
  dense.eps = 1e-10;
  auto store = std::make_unique<ShardStore>(
      spec, plan, 0, 1, *MakeOptimizer(dense), std::move(tables));
  store->TrackChanges();
  return store;
}

// One step pushing the rows `ids` (ascending, distinct).
void Step(ShardStore& store, std::vector<uint64_t> ids, int dim) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<float> grads(ids.size() * dim, 0.01f);
  std::vector<std::vector<float>> g;
  std::vector<absl::Span<const float>> views;
  for (int i = 0; i < store.num_chunks(); ++i) {
    g.emplace_back(store.chunk_spec(i).length, 0.001f);
  }
  for (const auto& v : g) views.emplace_back(v);
  RowGrads rows{0, ids, grads};
  store.ApplyStep(views, 1.0f, {&rows, 1});
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "table_checkpoint_bench: %s\n",
               std::string(s.message()).c_str());
  return 1;
}

double Ms(absl::Time since) {
  return absl::ToDoubleMilliseconds(absl::Now() - since);
}

int Main(int argc, char** argv) {
  auto flags =
      ParseFlags(argc, argv, {"rows", "dim", "touch", "steps", "dir"}, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "table_checkpoint_bench: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  Setup s;
  uint64_t value = 0;
  for (auto [key, field] : {std::pair<const char*, uint64_t*>{"rows", &s.rows},
                            {"touch", &s.touch}}) {
    if (flags->Has(key)) {
      if (!absl::SimpleAtoi(flags->Get(key, ""), &value) || value == 0) {
        std::fprintf(stderr, "table_checkpoint_bench: --%s must be > 0\n", key);
        return 2;
      }
      *field = value;
    }
  }
  s.dim = std::atoi(flags->Get("dim", "16").c_str());
  s.steps = std::atoi(flags->Get("steps", "10").c_str());
  if (s.dim < 1 || s.steps < 1) {
    std::fprintf(stderr,
                 "table_checkpoint_bench: --dim, --steps must be > 0\n");
    return 2;
  }
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string dir =
      flags->Get("dir", std::string(workspace != nullptr ? workspace : ".") +
                            "/out/table-checkpoint-bench");
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);

  ModelSpec spec;
  spec.tensors.push_back({"w", {1024}, 1024, 0.5f});
  spec.total_elements = 1024;
  const PartitionPlan plan = *PartitionPlan::Build(spec, 1 << 20, 1);
  auto store = MakeStore(s, spec, plan);
  // Fill: the rows, 100,000 a step.
  for (uint64_t begin = 0; begin < s.rows; begin += 100000) {
    std::vector<uint64_t> ids;
    for (uint64_t id = begin; id < std::min(s.rows, begin + 100000); ++id) {
      ids.push_back(id * 7919 % (uint64_t{1} << 40));
    }
    Step(*store, ids, s.dim);
  }
  std::printf("table: %llu rows of dim %d (adagrad), %.1f MB in memory\n",
              static_cast<unsigned long long>(store->table(0).rows()), s.dim,
              store->table(0).bytes() / 1e6);

  CheckpointState c;
  c.job_id = "bench";
  c.clocks = {0};
  c.last_accepted = {-1};
  absl::Time t = absl::Now();
  if (absl::Status s = store->SaveState(&c.store_state); !s.ok())
    return Fail(s);
  const double full_capture = Ms(t);
  const std::vector<int64_t> clocks = store->TableClocks();
  c.version = store->version();
  Checkpointer checkpointer(LocalFileSystem(), dir, 0, 2);
  t = absl::Now();
  auto full_path = checkpointer.Save(c);
  const double full_write = Ms(t);
  if (!full_path.ok()) {
    std::fprintf(stderr, "%s\n", full_path.status().ToString().c_str());
    return 1;
  }
  const std::string full_state = c.store_state;

  std::mt19937_64 random(5);
  uint64_t next_new = s.rows;
  for (int step = 0; step < s.steps; ++step) {
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < s.touch; ++i) {
      if (i % 10 == 0) {
        ids.push_back(next_new++ * 7919 % (uint64_t{1} << 40));
        continue;
      }
      const double u = std::uniform_real_distribution<double>(0, 1)(random);
      const uint64_t n = static_cast<uint64_t>(s.rows * u * u * u);
      ids.push_back(n * 7919 % (uint64_t{1} << 40));
    }
    Step(*store, ids, s.dim);
  }
  CheckpointState d = c;
  d.store_state.clear();
  d.incremental = true;
  d.base_version = c.version;
  d.version = store->version();
  t = absl::Now();
  if (absl::Status s = store->SaveChanges(clocks, &d.store_changes); !s.ok())
    return Fail(s);
  const double delta_capture = Ms(t);
  t = absl::Now();
  auto delta_path = checkpointer.Save(d);
  const double delta_write = Ms(t);
  if (!delta_path.ok()) {
    std::fprintf(stderr, "%s\n", delta_path.status().ToString().c_str());
    return 1;
  }
  // The same moment as a full checkpoint, for comparison.
  std::string end_state;
  t = absl::Now();
  if (absl::Status saved = store->SaveState(&end_state); !saved.ok())
    return Fail(saved);
  const double end_capture = Ms(t);
  CheckpointState end = c;
  end.version = d.version;
  end.store_state = end_state;
  t = absl::Now();
  const bool end_written = checkpointer.Save(end).ok();
  const double end_write = Ms(t);

  auto restored = MakeStore(s, spec, plan);
  t = absl::Now();
  absl::Status full_restore_status = restored->RestoreState(end_state);
  const double full_restore = Ms(t);
  restored = MakeStore(s, spec, plan);
  t = absl::Now();
  absl::Status delta_restore_status =
      restored->RestoreState(full_state, d.store_changes);
  const double delta_restore = Ms(t);
  if (!full_restore_status.ok() || !delta_restore_status.ok()) {
    std::fprintf(stderr, "restore: %s %s\n",
                 full_restore_status.ToString().c_str(),
                 delta_restore_status.ToString().c_str());
    return 1;
  }
  std::string check;
  if (absl::Status saved = restored->SaveState(&check); !saved.ok())
    return Fail(saved);
  const bool equal = check == end_state && end_written;
  std::printf(
      "after %d steps of %llu rows pushed:\n"
      "  full:        capture %8.1f ms (on the push's path), %8.1f MB, "
      "write %8.1f ms; restore %8.1f ms\n"
      "  incremental: capture %8.1f ms (on the push's path), %8.1f MB, "
      "write %8.1f ms; restore %8.1f ms (its full one's rows, then the "
      "changes)\n"
      "  (the full checkpoint it applies to: capture %.1f ms, write %.1f ms; "
      "restored equal, bit for bit: %s)\n",
      s.steps, static_cast<unsigned long long>(s.touch), end_capture,
      end_state.size() / 1e6, end_write, full_restore, delta_capture,
      d.store_changes.size() / 1e6, delta_write, delta_restore, full_capture,
      full_write, equal ? "yes" : "NO");
  std::filesystem::remove_all(dir, ignored);
  return equal ? 0 : 1;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
