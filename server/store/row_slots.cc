#include "server/store/row_slots.h"

#include <cstring>
#include <utility>

namespace paramd {

uint32_t RowSlots::Add(uint64_t id, int64_t last) {
  const uint32_t slot = size_++;
  if (slot / kRowSlabRows >= slabs_.size()) {
    slabs_.push_back(std::make_unique<float[]>(kRowSlabRows * stride_));
  }
  index_.emplace(id, slot);
  if (keeps_meta_) meta_.push_back(RowMeta{id, last, 0});
  return slot;
}

void RowSlots::Remove(uint32_t slot) {
  const uint32_t last = size_ - 1;
  index_.erase(meta_[slot].id);
  if (slot != last) {
    std::memcpy(Row(slot), Row(last), stride_ * sizeof(float));
    meta_[slot] = meta_[last];
    index_[meta_[slot].id] = slot;
  }
  meta_.pop_back();
  --size_;
}

void RowSlots::KeepMeta(int64_t last) {
  if (keeps_meta_) return;
  meta_.resize(size_);
  for (const auto& [id, slot] : index_) meta_[slot] = RowMeta{id, last, 1};
  keeps_meta_ = true;
}

std::vector<uint64_t> RowSlots::IdsBySlot() const {
  std::vector<uint64_t> ids(size_);
  for (const auto& [id, slot] : index_) ids[slot] = id;
  return ids;
}

void RowSlots::Shrink() {
  const size_t needed = (size_ + kRowSlabRows - 1) / kRowSlabRows;
  while (slabs_.size() > needed + 1) slabs_.pop_back();  // One spare.
  if (meta_.capacity() > 2 * meta_.size() + kRowSlabRows) meta_.shrink_to_fit();
  if (index_.capacity() > 4 * index_.size() + 1024) index_.rehash(0);
}

uint64_t RowSlots::bytes() const {
  const uint64_t slabs = slabs_.size() * kRowSlabRows * stride_ * sizeof(float);
  // A Swiss table entry is its value plus one control byte.
  const uint64_t index =
      index_.capacity() * (sizeof(std::pair<const uint64_t, uint32_t>) + 1);
  return slabs + index + meta_.capacity() * sizeof(RowMeta);
}

}  // namespace paramd
