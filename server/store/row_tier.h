// RowTier: the disk tier of an embedding table with storage
// (model.embeddings[i].storage; docs/sparse-tables.md, "Rows beyond
// memory"): the table's RowSpill, the folders it lives in, how many
// distinct rows the disk holds.
//
// The table (row_table.h) keeps at most MemoryRows rows in memory; a row
// it holds in memory is the row, whatever the disk holds of it (RowMeta's
// `disk` says what that is). A restore opens a new tier from a
// checkpoint's snapshot in a folder of its own, so the tier in use is
// untouched until the table installs the new one.
//
// Not thread-safe but for Write and rows(): the table's lock guards it
// (RowSpill itself is), and its writers are ordered by the table.
#ifndef PARAMD_SERVER_STORE_ROW_TIER_H_
#define PARAMD_SERVER_STORE_ROW_TIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/row_changes.h"
#include "server/store/row_spill.h"

namespace paramd {

class RowTier {
 public:
  // The rows of `stride` floats that `memory_bytes` hold in memory, each
  // with its RowMeta and its share of the index (a Swiss table entry at
  // its lowest load, 7/16), at least 64.
  static uint64_t MemoryRows(uint64_t memory_bytes, size_t stride);

  // An empty tier in `dir` (what an earlier process left there removed).
  static absl::StatusOr<std::unique_ptr<RowTier>> Open(const std::string& dir,
                                                       size_t stride);
  // A tier in a new folder beside this one's, holding the RowSpill
  // Snapshot in `snapshot`, which holds `rows` rows.
  absl::StatusOr<std::unique_ptr<RowTier>> OpenFrom(const std::string& snapshot,
                                                    uint64_t rows) const;

  RowSpill& spill() { return *spill_; }
  const RowSpill& spill() const { return *spill_; }
  // Distinct rows on disk.
  uint64_t rows() const { return rows_.load(); }
  // Writes rows (RowSpill::Put) of which `added` were not on disk yet.
  absl::Status Write(absl::Span<const uint64_t> ids, const float* rows,
                     absl::Span<const RowMeta> meta, uint64_t added);
  // Writes a Snapshot of the disk into `dir` (its parents made).
  absl::Status Snapshot(const std::string& dir) const;

 private:
  RowTier(std::string dir, std::unique_ptr<RowSpill> spill)
      : dir_(std::move(dir)), spill_(std::move(spill)) {}
  static RowSpill::Options SpillOptions(size_t stride);

  const std::string dir_;  // The table's folder; the spill in dir_/gN.
  std::unique_ptr<RowSpill> spill_;
  // Written by a move outside the table's lock, read under it.
  std::atomic<uint64_t> rows_{0};
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_TIER_H_
