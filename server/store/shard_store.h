// ShardStore: the parameter chunks one shard owns, their optimizer slots,
// and the version (number of optimizer steps applied).
//
// Thread-safe: steps take the lock exclusively, reads share it, so a reader
// always sees every chunk at one version. The store decides nothing about
// when a step happens; an UpdatePolicy calls ApplyStep.
#ifndef PARAMD_SERVER_STORE_SHARD_STORE_H_
#define PARAMD_SERVER_STORE_SHARD_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "server/store/row_table.h"

namespace paramd {

// Every chunk's parameters at one version, by local chunk index. Never
// changed once handed out, so pulls can send it without holding a lock.
struct ParamSnapshot {
  ParamSnapshot() = default;
  ParamSnapshot(const ParamSnapshot& other)
      : version(other.version), params(other.params) {}

  uint64_t version = 0;
  std::vector<std::vector<float>> params;

  // The params as IEEE half (common/base/half.h; beyond ±65504 saturates), for
  // pulls that ask for float16: converted by the first such pull of this
  // version and shared by the others.
  const std::vector<std::vector<uint16_t>>& Halves() const
      ABSL_LOCKS_EXCLUDED(halves_mu_);

 private:
  mutable absl::Mutex halves_mu_;
  // The version `halves_` holds (a snapshot no pull holds any more is
  // stepped in place and reused).
  mutable uint64_t halves_version_ ABSL_GUARDED_BY(halves_mu_) = UINT64_MAX;
  mutable std::vector<std::vector<uint16_t>> halves_
      ABSL_GUARDED_BY(halves_mu_);
};

// One table's gradient rows, as a policy hands them to ApplyStep.
struct RowGrads {
  uint32_t table = 0;
  absl::Span<const uint64_t> ids;  // Distinct.
  absl::Span<const float> values;  // dim per id, in the ids' order.
};

// Where one optimizer step's time went, for the step timeline: when it
// began, when the copy of the parameters a pull still held was done (the
// begin when stepped in place), and when each chunk's step ended (by local
// chunk index; rows are stepped first, before `begin`'s copy).
struct StepTimes {
  bool taken = false;    // ApplyStep filled it.
  uint64_t version = 0;  // The version the step made.
  absl::Time begin, copied;
  std::vector<absl::Time> chunk_ends;
};

class ShardStore {
 public:
  // Initialises every chunk `shard` owns in `plan` from the model's
  // deterministic initialiser with `seed`.
  // `tables` (by model.embeddings index) hold the shard's rows.
  ShardStore(const ModelSpec& spec, const PartitionPlan& plan, int shard,
             uint64_t seed, std::unique_ptr<Optimizer> optimizer,
             std::vector<std::unique_ptr<RowTable>> tables = {});

  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  // Chunks are addressed by local index [0, num_chunks()), in the order of
  // plan.ChunksOfShard(shard).
  int num_chunks() const { return static_cast<int>(specs_.size()); }
  const ChunkSpec& chunk_spec(int local) const { return specs_[local]; }
  // Whether chunk `local` is of a statistic (TensorKind::kStatistic).
  bool is_statistic(int local) const { return statistic_[local]; }
  // Local index of the plan's chunk `global`, or -1 when another shard owns
  // it.
  int LocalIndex(int global) const;
  int64_t bytes() const { return bytes_; }
  int shard() const { return shard_; }
  // The embedding tables, by model.embeddings index (each thread-safe).
  int num_tables() const { return static_cast<int>(tables_.size()); }
  const RowTable& table(int t) const { return *tables_[t]; }
  // The thread sweeping the tables with eviction (null when none has it).
  const RowEvictor* evictor() const { return evictor_.get(); }
  // RESOURCE_EXHAUSTED, naming table and shard, when the new rows of
  // `rows` (those a table does not hold and `pending(table, id)` does not
  // count yet; pending_new[t] of table t's are counted already) would take
  // a table past its max_rows (or 2^32 - 1 rows on one shard). Without
  // `pending` and `pending_new`: no rows are on their way in yet.
  absl::Status CheckRowRoom(
      absl::Span<const RowGrads> rows,
      const std::function<bool(uint32_t, uint64_t)>& pending = nullptr,
      const std::vector<uint64_t>& pending_new = {}) const;

  // One optimizer step on every chunk with gradient grads[local] * scale
  // (grads[local] has the chunk's length; a statistic's chunk adds it
  // instead, TensorKind::kStatistic), and one on each table's rows in
  // `rows` (at most one entry per table); the version goes up by one.
  // `times`, unless null, receives where the step's time went.
  void ApplyStep(absl::Span<const absl::Span<const float>> grads, float scale,
                 absl::Span<const RowGrads> rows = {},
                 StepTimes* times = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // One optimizer step on each table's rows in `rows` (at most one entry
  // per table) with their gradient * scale, and none on the chunks: the
  // version stays (rows of a table with policy async, applied as a push
  // comes, UpdatePolicy).
  void ApplyRows(absl::Span<const RowGrads> rows, float scale)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A step taken chunk by chunk (a sync round committed in slices,
  // SyncRule): StepChunks steps the chunks `locals` — with
  // grads[local] * scale, as ApplyStep, at the step ApplyStep would take
  // now — into the next version's parameters, kept apart from the current
  // ones: readers see the current version until FinishChunkedStep (the
  // optimizer slots are stepped in place), and SnapshotAt serves the
  // chunks stepped so far. A chunk is stepped at most once per step;
  // FinishChunkedStep carries the chunks no StepChunks stepped over as
  // they are, applies `rows`, and makes the next version current, so a
  // step whose every chunk went through StepChunks leaves the store
  // exactly as one ApplyStep with the same gradients. Until then SaveState
  // saves the current version: the stepped chunks' slots as they were
  // before their step.
  void StepChunks(absl::Span<const int> locals,
                  absl::Span<const absl::Span<const float>> grads, float scale)
      ABSL_LOCKS_EXCLUDED(mu_);
  void FinishChunkedStep(absl::Span<const RowGrads> rows = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a chunked step is under way (a StepChunks since the last
  // FinishChunkedStep).
  bool stepping_chunks() const ABSL_LOCKS_EXCLUDED(mu_);
  // What a pull of chunks at `version` reads: the next version's
  // parameters while a chunked step makes that version (of them, only the
  // chunks stepped so far are that version's), else Snapshot().
  std::shared_ptr<const ParamSnapshot> SnapshotAt(uint64_t version) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces every chunk's parameters with values[local] (each of the
  // chunk's length), keeping the version: a worker's initial values
  // (model.initial_values: rank0). Optimizer slots are as at the start.
  void Assign(absl::Span<const absl::Span<const float>> values)
      ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t version() const ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the version up to `version` without a step (a shard restored
  // from an older checkpoint catching up with the job's clock: the steps
  // in between are lost on this shard). Lower versions change nothing.
  void AdvanceVersionTo(uint64_t version) ABSL_LOCKS_EXCLUDED(mu_);

  // Writes the version, every chunk's parameters and optimizer slots to
  // `out` (a self-describing little-endian byte string), and each table's
  // rows (a table with storage: a snapshot of its disk, in a folder under
  // snapshot_dirs(version); errors name the table).
  absl::Status SaveState(std::string* out) const ABSL_LOCKS_EXCLUDED(mu_);
  // Where SaveState puts the snapshots of tables with storage: a folder
  // for each version (the checkpoint's; server/checkpoint). Set before
  // serving.
  void SetSnapshotDirs(std::function<std::string(uint64_t)> snapshot_dirs) {
    snapshot_dirs_ = std::move(snapshot_dirs);
  }
  // Replaces the version, parameters and slots with a SaveState of a store
  // with the same chunks and optimizer slot count, and with `changes` (a
  // SaveChanges since that state's table clocks) applied on it when not
  // empty. On error (damaged, truncated, another shape, changes of another
  // base) nothing changes.
  absl::Status RestoreState(absl::string_view state,
                            absl::string_view changes = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // Incremental saves (checkpoint.full_every): TrackChanges (before
  // serving) makes every table keep what SaveChanges needs. SaveChanges
  // writes the dense part whole (it changes at every step anyway) and each
  // table's rows changed after since[t] (RowTable::SaveChanges), where
  // since is the TableClocks of the SaveState it applies to.
  void TrackChanges();
  // Whether every table tracks changes (true without tables).
  bool tracks_changes() const;
  absl::Status SaveChanges(absl::Span<const int64_t> since,
                           std::string* out) const ABSL_LOCKS_EXCLUDED(mu_);
  // Each table's clock (RowTable::clock), by table.
  std::vector<int64_t> TableClocks() const;
  // The ids of dropped rows the tables keep for SaveChanges and Export:
  // each holder (kCheckpointHolder: the last durable full checkpoint,
  // kExportHolder: the oldest export remembered) needs those dropped at
  // its table clocks or later; the tables forget the older ones
  // (RowTable::ForgetRemovedBefore). Empty `clocks`: the holder needs
  // none. Thread-safe.
  static constexpr int kCheckpointHolder = 0;
  static constexpr int kExportHolder = 1;
  void HoldDropped(int holder, std::vector<int64_t> clocks)
      ABSL_LOCKS_EXCLUDED(holds_mu_);

  // The model for serving at one version: the dense chunks (shared, never
  // changed) and each table's rows — all of them (empty `since`), or
  // those changed after since[t] with the ids dropped since. No step runs
  // while the rows are copied. Tables must track changes for `since`.
  struct Exported {
    uint64_t version = 0;
    std::shared_ptr<const ParamSnapshot> dense;
    std::vector<int64_t> table_clocks;
    std::vector<RowTable::Exported> tables;
    absl::Status status;  // Tables with storage: whether the disk was read.
  };
  Exported Export(absl::Span<const int64_t> since) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The parameters at the current version, without a copy: every caller
  // between two steps shares them, and they never change while anyone
  // holds them (the next step then works on a copy).
  std::shared_ptr<const ParamSnapshot> Snapshot() const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `read(version, params)` with every chunk's parameters, by local
  // index, under a shared lock: no step runs meanwhile.
  void Read(
      const std::function<void(uint64_t, absl::Span<const std::vector<float>>)>&
          read) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Constant after construction.
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<ChunkSpec> specs_;
  // By local index: whether the chunk is of a statistic (added as pushed,
  // not stepped by the optimizer).
  std::vector<bool> statistic_;
  std::vector<int> local_of_global_;
  int64_t bytes_ = 0;
  const int shard_;
  const std::vector<std::unique_ptr<RowTable>> tables_;
  std::function<std::string(uint64_t)> snapshot_dirs_;
  // Sweeps the tables with eviction; null when none has it. Stopped before
  // the tables go.
  std::unique_ptr<RowEvictor> evictor_;
  // Wakes the evictor when a table asks for a sweep.
  void WakeEvictor() const;
  absl::Mutex holds_mu_;
  std::vector<std::vector<int64_t>> holds_ ABSL_GUARDED_BY(holds_mu_){2};

  // Taken under the policy's lock; held while a step applies the row
  // tables' updates (they take their own lock under it).
  mutable absl::Mutex mu_;
  // The parameters at version_. Pulls hold it (Snapshot) while they send
  // it; a step changes it in place only when none does.
  std::shared_ptr<ParamSnapshot> params_ ABSL_GUARDED_BY(mu_);
  // The buffer of an earlier version, reused once no pull holds it.
  std::shared_ptr<ParamSnapshot> spare_ ABSL_GUARDED_BY(mu_);
  // A chunked step's next version (StepChunks); null outside one. Pulls
  // hold it while a later StepChunks writes other chunks of it.
  std::shared_ptr<ParamSnapshot> next_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> stepped_ ABSL_GUARDED_BY(mu_);  // By local, in next_.
  // By local: a stepped chunk's optimizer slots before its step, which
  // SaveState writes while the chunked step is under way.
  std::vector<std::vector<std::vector<float>>> slots_before_
      ABSL_GUARDED_BY(mu_);
  // The dense part of a state: SaveState's and SaveChanges' first part
  // (`format` tells them apart), and its parse from the front of `*bytes`.
  struct DenseState {
    uint64_t version = 0;
    std::vector<std::vector<float>> params;
    std::vector<std::vector<std::vector<float>>> slots;
  };
  void SaveDenseLocked(uint32_t format, std::string* out) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Where a save at this version puts `table`'s disk snapshot ("" without
  // storage or snapshot_dirs_).
  std::string SnapshotDirLocked(const RowTable& table) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status ParseDense(absl::string_view* bytes, uint32_t format,
                          DenseState* out) const;
  // AdvanceVersionTo, with mu_ held.
  void AdvanceLocked(uint64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One step on each table's rows in `rows` (ApplyRows, ApplyStep's rows).
  void ApplyRowsLocked(absl::Span<const RowGrads> rows, float scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Steps chunk `local` of `params` (its slots in place) at step `step`.
  void StepChunk(size_t local, std::vector<float>* params,
                 absl::Span<const float> grad, float scale, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // slots_[local] holds optimizer_->num_slots() buffers.
  std::vector<std::vector<std::vector<float>>> slots_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_SHARD_STORE_H_
