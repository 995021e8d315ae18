// RowTable: the rows of one embedding table that one shard holds, with
// their optimizer state.
//
// The rows in memory are RowSlots (row_slots.h: an index from id to slot,
// slabs of rows, each row's values followed by its optimizer slots). Rows
// never pushed are not stored: Read answers their initial values
// (common/model/rows.h).
//
// With eviction (server/store/row_eviction.h), storage, or changes
// tracked for incremental checkpoints (TrackChanges), each row also keeps
// its id, last update and count (RowMeta, by slot); a sweep drops rows by
// moving the last slot's row into each hole, so the slots stay dense, and
// frees the slabs past the end.
//
// With storage (config().storage, after OpenStorage), at most
// RowTier::MemoryRows rows stay in memory: past them the evictor's thread
// moves the least recently pushed out to the table's RowTier (RocksDB on
// the server's disk) beside the pushes, and a row touched again is read
// back — into memory by a push, into the reply alone by a pull. Every
// save, full or incremental, writes the rows memory changed onto the disk
// and snapshots it (the save holds the snapshot's folder; the snapshots
// share the files that did not change, hard-linked), so no save copies
// the table into memory. A failed read of the disk stops the server: its
// checkpoint restores it.
//
// An update gathers the touched rows into contiguous buffers, runs the
// dense Optimizer over them (element-wise, so equal to the dense update of
// those rows) and scatters them back. Thread-safe: Apply takes the lock
// exclusively, Read shares it.
#ifndef PARAMD_SERVER_STORE_ROW_TABLE_H_
#define PARAMD_SERVER_STORE_ROW_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "server/optimizer/optimizer.h"
#include "server/store/row_admission.h"
#include "server/store/row_changes.h"
#include "server/store/row_eviction.h"
#include "server/store/row_slots.h"
#include "server/store/row_tier.h"

namespace paramd {

// The table's optimizer (sgd, adagrad or lazy adam) as the dense one.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeRowOptimizer(
    const EmbeddingTableConfig& config);

class RowTable {
 public:
  static constexpr size_t kSlabRows = kRowSlabRows;

  RowTable(const EmbeddingTableConfig& config, uint32_t table, uint64_t seed,
           std::unique_ptr<Optimizer> optimizer);

  const EmbeddingTableConfig& config() const { return config_; }
  int dim() const { return config_.dim; }

  // With storage: opens the table's disk tier in `dir` (the shard's own),
  // removing what an earlier process left there. Call before serving.
  absl::Status OpenStorage(const std::string& dir) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a push's new rows count against a limit (CheckRowRoom): not
  // with storage, where telling a new row from one on disk reads the disk.
  bool limits_rows() const { return !config_.storage.enabled(); }
  // The rows the disk holds (0 without storage) and its files' bytes.
  uint64_t rows_on_disk() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return tier_ ? tier_->rows() : 0;
  }
  uint64_t disk_bytes() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return tier_ ? tier_->spill().DiskBytes() : 0;
  }
  // Rows moved out to disk, and read back from it by pushes.
  uint64_t rows_moved_out() const { return rows_moved_out_.load(); }
  uint64_t rows_read_back() const { return rows_read_back_.load(); }

  // Writes the rows `ids` (each below rows) into out[i * dim, (i+1) * dim).
  void Read(absl::Span<const uint64_t> ids, float* out) const
      ABSL_LOCKS_EXCLUDED(mu_);
  bool Holds(uint64_t id) const ABSL_LOCKS_EXCLUDED(mu_);
  // One optimizer step over the rows `ids` (distinct) with gradient
  // grads[i * dim + j] * scale, creating rows not held yet at their
  // initial values — those the table's admission takes; the others'
  // gradients are dropped. Other rows do not change (lazy).
  void Apply(absl::Span<const uint64_t> ids, absl::Span<const float> grads,
             float scale) ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t rows() const ABSL_LOCKS_EXCLUDED(mu_);
  // The rows held in memory (rows() without storage).
  uint64_t rows_in_memory() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return held_.size();
  }
  // Memory held: slabs and the index.
  uint64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Counters for status: rows served by pulls, row gradients accepted.
  void CountPulled(uint64_t n) const { rows_pulled_ += n; }
  void CountPushed(uint64_t n) const { rows_pushed_ += n; }
  uint64_t rows_pulled() const { return rows_pulled_.load(); }
  uint64_t rows_pushed() const { return rows_pushed_.load(); }
  // Row gradients dropped because admission did not take their id.
  uint64_t rows_not_admitted() const { return rows_not_admitted_.load(); }
  // Rows dropped by eviction (a row dropped twice counts twice).
  uint64_t rows_evicted() const { return rows_evicted_.load(); }

  // Whether the table asks for a sweep (row_eviction.h's SweepDue, as of
  // its last update); never without eviction.
  bool sweep_due() const { return sweep_due_.load(); }
  // Drops the rows the table's eviction says to (row_eviction.h), or with
  // storage moves the least recently pushed out to disk until a sixteenth
  // below its memory rows are left, then writes every changed row back
  // (due also once a sixteenth of the memory's rows changed); returns how
  // many moved. Scans under the shared lock and removes under the
  // exclusive one, each in pieces of
  // kSweepRows rows (a move's disk write between the two, under neither),
  // so pushes and pulls go on in between; a row pushed since the scan
  // stays. Without eviction or storage: 0.
  uint64_t Sweep() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  static constexpr uint32_t kSweepRows = 16384;
  // Updates applied (every Apply, admitted rows or not): eviction's clock.
  int64_t clock() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return clock_;
  }

  // Optimizer steps applied (the lazy Adam's bias-correction count).
  int64_t steps() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return steps_;
  }

  // Appends the steps, the clock, every row's id, values and slots (and
  // with eviction or tracked changes, its last update and count) to `out`.
  // With storage: writes every row onto the disk, snapshots it into
  // `snapshot_dir` (which must not exist) and appends the steps, the clock,
  // the rows' count and the snapshot's folder; errors name the table.
  absl::Status Save(std::string* out, const std::string& snapshot_dir = "")
      ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // A Save's rows, read and checked, not yet installed.
  using Saved = SavedRows;
  // Reads a Save of this table from the front of `*in` (which moves past
  // it), or one of the format before the clock; changes nothing here but,
  // with storage, opens the disk the state will have in a folder of its
  // own (the snapshot's rows, or none).
  absl::StatusOr<Saved> Parse(absl::string_view* in) const;
  // Replaces the rows with `saved`'s.
  void Install(Saved saved) ABSL_LOCKS_EXCLUDED(mu_);

  // Incremental saves. TrackChanges (before the first Apply) keeps every
  // row's last update (RowMeta, 24 bytes a row unless eviction keeps it
  // already) and the update at which each row a sweep dropped went.
  // May be called while serving (an export asks for it).
  void TrackChanges() ABSL_LOCKS_EXCLUDED(mu_);
  bool tracks_changes() const { return track_changes_.load(); }
  // Appends what changed after update `since` (a Save's clock): the ids
  // of the rows dropped since (at `since` itself too: a sweep runs beside
  // the saves), then every row pushed or created after it, whole (values,
  // slots, last update, count), with the steps and the clock now.
  // Requires TrackChanges.
  // With storage: a Save (into `snapshot_dir`), whose files the snapshots
  // before it share (hard links) where they did not change.
  absl::Status SaveChanges(int64_t since, std::string* out,
                           const std::string& snapshot_dir = "")
      ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Reads a SaveChanges from the front of `*in` (which moves past it) onto
  // `saved`, a Parse of the state at the delta's `since`: the dropped rows
  // leave, the changed ones are replaced or added (with storage: the
  // snapshot replaces `saved`). FailedPrecondition when
  // `saved` is at another update; on any error `saved` may be part-way.
  absl::Status ParseChangesInto(absl::string_view* in, Saved* saved) const;
  // Forgets the dropped rows' ids from before update `clock` (a full save
  // at `clock` is durable: no later SaveChanges starts earlier).
  void ForgetRemovedBefore(int64_t clock) ABSL_LOCKS_EXCLUDED(mu_);
  // Dropped rows' ids held for SaveChanges.
  uint64_t removed_held() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return removed_.size();
  }

  // A table's rows for serving: ids with their values (dim floats each,
  // no optimizer slots), in slot order, and ids dropped since.
  struct Exported {
    std::vector<uint64_t> ids;
    std::vector<float> values;
    std::vector<uint64_t> dropped;
    absl::Status status;  // With storage: whether the disk was read.
  };
  // Every row (since < 0), or only those pushed or created after update
  // `since` and the ids dropped since (requires TrackChanges), under the
  // shared lock. Returns the clock they are at.
  int64_t Export(int64_t since, Exported* out) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Adds row `id` at its initial values (slots zero); returns its slot.
  uint32_t AddRow(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With storage: held_ made for the rows memory holds (RowSlots::Reserve).
  void ReserveMemoryRows() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With storage: Sweep's moves, and Save's.
  uint64_t MoveOut() ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Writes the rows whose copy on disk is not theirs onto `tier`, a piece
  // at a time, outside the table's lock: one pass over the slots.
  void WriteBack(const std::shared_ptr<RowTier>& tier)
      ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  absl::Status SaveToDisk(const std::string& snapshot_dir, std::string* out)
      ABSL_LOCKS_EXCLUDED(mu_, write_mu_);
  // Whether Save and SaveChanges write the disk's snapshot.
  bool on_disk() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    return tier_ != nullptr;
  }
  RowFormat Format() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return RowFormat{&config_, table_, stride_, held_.keeps_meta()};
  }

  // The sweep's victims, expired rows first.
  std::vector<RowVictim> ChooseVictims(const EvictionConfig& e)
      ABSL_LOCKS_EXCLUDED(mu_);
  // What a sweep follows: the table's eviction, or with storage the
  // memory's rows in lru order.
  const EvictionConfig& sweep_order() const {
    return config_.storage.enabled() ? memory_order_ : config_.eviction;
  }

  const EmbeddingTableConfig config_;
  const uint32_t table_;
  const uint64_t seed_;
  const std::unique_ptr<Optimizer> optimizer_;
  const size_t stride_;          // Floats per row: dim × (1 + slots).
  EvictionConfig memory_order_;  // With storage: capacity = memory rows.

  mutable std::atomic<uint64_t> rows_pulled_{0};
  mutable std::atomic<uint64_t> rows_pushed_{0};
  std::atomic<uint64_t> rows_not_admitted_{0};
  std::atomic<uint64_t> rows_evicted_{0};
  std::atomic<bool> sweep_due_{false};
  std::atomic<uint64_t> rows_moved_out_{0};
  mutable std::atomic<uint64_t> rows_read_back_{0};

  // Orders the disk's writers (a move's pieces, a save) before mu_, so a
  // row's copy on disk is counted once.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  mutable absl::Mutex mu_;
  // The rows in memory; each keeps its RowMeta with eviction, storage or
  // tracked changes.
  RowSlots held_ ABSL_GUARDED_BY(mu_);
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_sweep_ ABSL_GUARDED_BY(mu_) = 0;
  // With storage: rows that became changed in memory (new, or pushed when
  // the disk held their copy) since the last sweep.
  uint64_t changed_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by TrackChanges (under mu_, with held_'s meta on); never unset.
  std::atomic<bool> track_changes_{false};
  // With tracked changes: the rows a sweep dropped, until
  // ForgetRemovedBefore.
  DroppedRows removed_ ABSL_GUARDED_BY(mu_);
  // Apply's gathered rows: values, then one buffer per slot.
  std::vector<float> params_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<float>> gathered_slots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> where_ ABSL_GUARDED_BY(mu_);
  // With admission: the gradients of the rows taken, and which those are.
  std::vector<float> grads_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> taken_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<RowAdmission> admission_ ABSL_GUARDED_BY(mu_);
  // With storage, once open: the disk (shared with a move under way).
  std::shared_ptr<RowTier> tier_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_TABLE_H_
