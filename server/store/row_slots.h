// RowSlots: the rows of a table held in memory. An index from row id to
// a slot number (absl::flat_hash_map: a Swiss table, open addressing with
// one control byte per entry, 16 bytes per entry at most 7/8 full), the
// rows in slabs of kRowSlabRows slots — each row's values then its
// optimizer slots, `stride` floats, one contiguous piece that growing
// never moves — and, once KeepMeta was called, each row's RowMeta by slot,
// in slabs beside the rows' (so neither ever reallocates: a vector's
// doubling would hold twice its rows' meta, and both copies while it
// grows). Slots stay dense: removing a row moves the last slot's row into
// its hole.
//
// Not thread-safe: its table's lock guards it (row_table.h). A table's
// saves read back (SavedRows, row_changes.h) are RowSlots too.
#ifndef PARAMD_SERVER_STORE_ROW_SLOTS_H_
#define PARAMD_SERVER_STORE_ROW_SLOTS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/store/row_eviction.h"

namespace paramd {

// Rows per slab of a table's storage.
constexpr size_t kRowSlabRows = 4096;

class RowSlots {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit RowSlots(size_t stride = 0) : stride_(stride) {}

  size_t stride() const { return stride_; }
  uint32_t size() const { return size_; }
  // Row `id`'s slot, or kNone.
  uint32_t Find(uint64_t id) const {
    auto it = index_.find(id);
    return it == index_.end() ? kNone : it->second;
  }
  bool Contains(uint64_t id) const { return index_.contains(id); }
  float* Row(uint32_t slot) {
    return slabs_[slot / kRowSlabRows].rows.get() +
           (slot % kRowSlabRows) * stride_;
  }
  const float* Row(uint32_t slot) const {
    return slabs_[slot / kRowSlabRows].rows.get() +
           (slot % kRowSlabRows) * stride_;
  }
  // A new slot for row `id` (not held), its floats as the slab left them;
  // with meta, its RowMeta is {id, last, 0}.
  uint32_t Add(uint64_t id, int64_t last = 0);
  // Drops the row in `slot`: the last slot's row moves into it. Requires
  // meta (the ids by slot).
  void Remove(uint32_t slot);

  // Whether each row keeps a RowMeta; KeepMeta turns it on, every row held
  // getting {id, last, 1}.
  bool keeps_meta() const { return keeps_meta_; }
  void KeepMeta(int64_t last);
  RowMeta& meta(uint32_t slot) {
    return slabs_[slot / kRowSlabRows].meta[slot % kRowSlabRows];
  }
  const RowMeta& meta(uint32_t slot) const {
    return slabs_[slot / kRowSlabRows].meta[slot % kRowSlabRows];
  }

  // Each row's id, by slot.
  std::vector<uint64_t> IdsBySlot() const;
  // A table bounded in memory (storage, row_tier.h) holds up to `rows`
  // rows, and up to `index_rows` between the evictor's sweeps: the index
  // is made that large now, so it never rehashes (which holds the old
  // index and one twice as large at once), and Shrink keeps the slabs of
  // `rows`, which the next rows would allocate again.
  void Reserve(uint64_t rows, uint64_t index_rows);
  // Frees the slabs (all but one spare, and those Reserve keeps) and the
  // index room removed rows left.
  void Shrink();
  // Memory held: slabs (meta included) and index.
  uint64_t bytes() const;
  // The bytes of an index made for `rows` rows (Reserve's): absl's
  // capacity for them (a power of two less one, at most 7/8 full) times
  // an entry and its control byte.
  static uint64_t IndexBytes(uint64_t rows);
  // The bytes of one slab of rows of `stride` floats, with their RowMeta
  // when `meta`.
  static uint64_t SlabBytes(size_t stride, bool meta) {
    return kRowSlabRows *
           (stride * sizeof(float) + (meta ? sizeof(RowMeta) : 0));
  }

 private:
  // A Swiss table entry: its value and one control byte.
  static constexpr uint64_t kIndexEntryBytes =
      sizeof(std::pair<const uint64_t, uint32_t>) + 1;
  struct Slab {
    std::unique_ptr<float[]> rows;
    std::unique_ptr<RowMeta[]> meta;  // With keeps_meta_.
  };
  void AddSlab();

  size_t stride_;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<Slab> slabs_;
  uint32_t size_ = 0;
  bool keeps_meta_ = false;
  size_t kept_slabs_ = 0;    // Reserve's.
  uint64_t index_rows_ = 0;  // Reserve's.
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_SLOTS_H_
