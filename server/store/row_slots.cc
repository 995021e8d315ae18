#include "server/store/row_slots.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace paramd {

void RowSlots::AddSlab() {
  Slab slab;
  slab.rows = std::make_unique<float[]>(kRowSlabRows * stride_);
  if (keeps_meta_) slab.meta = std::make_unique<RowMeta[]>(kRowSlabRows);
  slabs_.push_back(std::move(slab));
}

uint32_t RowSlots::Add(uint64_t id, int64_t last) {
  const uint32_t slot = size_++;
  if (slot / kRowSlabRows >= slabs_.size()) AddSlab();
  index_.emplace(id, slot);
  if (keeps_meta_) meta(slot) = RowMeta{id, last, 0};
  return slot;
}

void RowSlots::Remove(uint32_t slot) {
  const uint32_t last = size_ - 1;
  index_.erase(meta(slot).id);
  if (slot != last) {
    std::memcpy(Row(slot), Row(last), stride_ * sizeof(float));
    meta(slot) = meta(last);
    index_[meta(slot).id] = slot;
  }
  --size_;
}

void RowSlots::KeepMeta(int64_t last) {
  if (keeps_meta_) return;
  for (Slab& slab : slabs_) {
    slab.meta = std::make_unique<RowMeta[]>(kRowSlabRows);
  }
  keeps_meta_ = true;
  for (const auto& [id, slot] : index_) meta(slot) = RowMeta{id, last, 1};
}

std::vector<uint64_t> RowSlots::IdsBySlot() const {
  std::vector<uint64_t> ids(size_);
  for (const auto& [id, slot] : index_) ids[slot] = id;
  return ids;
}

void RowSlots::Reserve(uint64_t rows, uint64_t index_rows) {
  kept_slabs_ = (rows + kRowSlabRows - 1) / kRowSlabRows;
  index_rows_ = std::max(rows, index_rows);
  index_.reserve(index_rows_);
}

void RowSlots::Shrink() {
  const size_t needed = (size_ + kRowSlabRows - 1) / kRowSlabRows;
  const size_t keep = std::max(needed + 1, kept_slabs_);  // One spare.
  while (slabs_.size() > keep) slabs_.pop_back();
  // A reserved index stays: its table's memory counts it.
  if (index_rows_ == 0 && index_.capacity() > 4 * index_.size() + 1024) {
    index_.rehash(0);
  }
}

uint64_t RowSlots::bytes() const {
  return slabs_.size() * SlabBytes(stride_, keeps_meta_) +
         index_.capacity() * kIndexEntryBytes;
}

uint64_t RowSlots::IndexBytes(uint64_t rows) {
  if (rows == 0) return 0;
  // absl's GrowthToLowerboundCapacity, then NormalizeCapacity: the least
  // 2^k - 1 that holds rows at 7/8 full (row_slots_test checks it
  // against absl's own).
  const uint64_t least = rows + (rows - 1) / 7;
  uint64_t capacity = 1;
  while (capacity < least) capacity = capacity * 2 + 1;
  return capacity * kIndexEntryBytes;
}

}  // namespace paramd
