#include "server/store/row_admission.h"

#include <algorithm>

#include "common/base/mix.h"

namespace paramd {

RowAdmission::RowAdmission(const AdmissionConfig& config, uint32_t table,
                           uint64_t seed)
    : config_(config), key_(Mix(seed ^ Mix(0xAD41ULL + table))) {
  if (config_.min_count > 0) {
    width_ = (size_t{1} << 20) * config_.sketch_mib / kDepth;
    counts_.assign(width_ * kDepth, 0);
  }
}

size_t RowAdmission::Cell(uint64_t id, int d) const {
  return d * width_ + Mix(key_ ^ Mix(id * kDepth + d)) % width_;
}

int RowAdmission::Count(uint64_t id) const {
  if (width_ == 0) return 0;
  uint8_t least = UINT8_MAX;
  for (int d = 0; d < kDepth; ++d)
    least = std::min(least, counts_[Cell(id, d)]);
  return least;
}

bool RowAdmission::Admit(uint64_t id, int64_t step) {
  if (config_.min_count == 0) {
    const uint64_t bits =
        Mix(key_ ^ Mix(id) ^ Mix(~static_cast<uint64_t>(step)));
    return static_cast<double>(bits >> 11) * 0x1.0p-53 < config_.probability;
  }
  size_t cells[kDepth];
  uint8_t least = UINT8_MAX;
  for (int d = 0; d < kDepth; ++d) {
    cells[d] = Cell(id, d);
    least = std::min(least, counts_[cells[d]]);
  }
  if (least < UINT8_MAX) {
    // Conservative update: only the counters at the least grow.
    for (size_t c : cells) {
      if (counts_[c] == least) ++counts_[c];
    }
    ++least;
  }
  return least >= config_.min_count;
}

}  // namespace paramd
