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
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/store/row_changes.h"
#include "server/store/row_slots.h"
#include "server/store/row_spill.h"

namespace paramd {

class RowTier {
 public:
  // Rows per disk write of WriteChanged.
  static constexpr size_t kWriteRows = 16384;

  // What a table's `memory_bytes` (storage.memory_bytes) holds: the
  // disk's caches — a block cache of memory_bytes / 16 and two write
  // buffers of memory_bytes / 32, each in [1, 64] and [1, 32] MiB — and
  // the most rows of `stride` floats the rest holds (at least 64): their
  // slabs (RowSlots': the floats and RowMeta, a spare slab included) and
  // an index made for IndexRows of them.
  static RowSpill::Options SpillOptions(size_t stride, uint64_t memory_bytes);
  static uint64_t MemoryRows(uint64_t memory_bytes, size_t stride);
  // The rows a table of `memory_rows` makes its index for: an eighth more,
  // the rows pushes may add while the evictor's sweep moves rows out.
  static uint64_t IndexRows(uint64_t memory_rows) {
    return memory_rows + memory_rows / 8;
  }

  // An empty tier in `dir` (what an earlier process left there removed).
  static absl::StatusOr<std::unique_ptr<RowTier>> Open(const std::string& dir,
                                                       size_t stride,
                                                       uint64_t memory_bytes);
  // A tier in a new folder beside this one's, holding the RowSpill
  // Snapshot in `snapshot`, which holds `rows` rows.
  absl::StatusOr<std::unique_ptr<RowTier>> OpenFrom(const std::string& snapshot,
                                                    uint64_t rows) const;

  RowSpill& spill() { return *spill_; }
  const RowSpill& spill() const { return *spill_; }
  // Distinct rows on disk.
  uint64_t rows() const { return rows_.load(); }
  // Rows copied out of memory for one disk write: ids, rows (stride
  // floats each), meta, and how many of them the disk has no copy of.
  struct Piece {
    std::vector<uint64_t> ids;
    std::vector<float> rows;
    std::vector<RowMeta> metas;
    uint64_t added = 0;
    void Clear();
    // Copies row `slot` of `held` into the piece.
    void Take(const RowSlots& held, uint32_t slot);
  };
  // Writes `piece` (logging a failure, naming the table `name`: the rows
  // stay in memory); whether it was written.
  bool Write(const Piece& piece, const std::string& name);
  // Writes rows (RowSpill::Put) of which `added` were not on disk yet.
  absl::Status Write(absl::Span<const uint64_t> ids, const float* rows,
                     absl::Span<const RowMeta> meta, uint64_t added);

  // A table's save with storage: "PRWS", table (u32), floats per row (u32),
  // steps and clock (i64 each), rows (u64), and the snapshot's folder
  // (u32 bytes, then its path). Save writes the rows of `held` whose copy
  // on disk is not theirs onto the disk, snapshots it into `snapshot_dir`
  // (its parents made) and appends the save to `out`.
  absl::Status Save(const RowFormat& format, int64_t steps, int64_t clock,
                    const std::string& snapshot_dir, RowSlots* held,
                    std::string* out);
  // Whether `in` starts with such a save.
  static bool IsSave(absl::string_view in);
  // Reads one from the front of `*in` (which moves past it) and opens the
  // disk it names in a folder beside this tier's (OpenFrom): the saved
  // rows, none in memory. Errors name the snapshot.
  absl::StatusOr<SavedRows> Parse(const RowFormat& format,
                                  absl::string_view* in) const;

  // The table's operations on its rows in memory (`held`, under the
  // table's lock), each naming the table `name` in what it says.
  // Reads `ids` from disk: rows into out (stride floats each), meta,
  // found. A failed read stops the server: a row the disk cannot give
  // back would be served or stepped from its initial values, and the
  // checkpoint restores it.
  void Read(absl::Span<const uint64_t> ids, std::vector<float>* out,
            std::vector<RowMeta>* meta, std::vector<bool>* found,
            const std::string& name) const;
  // Brings the rows of `ids` the disk holds and `held` does not into
  // `held` (RowMeta's disk: kSame); returns how many.
  uint64_t ReadBack(absl::Span<const uint64_t> ids, RowSlots* held,
                    const std::string& name) const;
  // Writes every row of `held` whose copy on disk is not its own (kSame
  // after).
  absl::Status WriteChanged(RowSlots* held);

 private:
  RowTier(std::string dir, RowSpill::Options options,
          std::unique_ptr<RowSpill> spill)
      : dir_(std::move(dir)), options_(options), spill_(std::move(spill)) {}

  const std::string dir_;  // The table's folder; the spill in dir_/gN.
  const RowSpill::Options options_;
  std::unique_ptr<RowSpill> spill_;
  // Written by a move outside the table's lock, read under it.
  std::atomic<uint64_t> rows_{0};
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_TIER_H_
