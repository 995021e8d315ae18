#include "worker/model/image_features.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/mix.h"

namespace paramd {
namespace {

int SquareSide(int64_t pixels) {
  const int side = static_cast<int>(std::lround(std::sqrt(pixels)));
  return int64_t{side} * side == pixels ? side : 0;
}

}  // namespace

uint64_t ImageFeatures::FeatureId(uint32_t kind, uint32_t position,
                                  uint32_t value, uint64_t rows) {
  const uint64_t key =
      (uint64_t{kind} << 56) ^ (uint64_t{position} << 24) ^ value;
  return Mix(key) % rows;
}

absl::StatusOr<ImageFeatures> ImageFeatures::Create(
    const FeaturesConfig& features, uint64_t rows, int64_t pixels) {
  if (pixels < 1 || pixels > (1 << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ImageFeatures: images of ", pixels, " pixels"));
  }
  if (rows < 1 || features.levels < 2 || features.levels > 256) {
    return absl::InvalidArgumentError(absl::StrCat("ImageFeatures: a table of ",
                                                   rows, " rows, ",
                                                   features.levels, " levels"));
  }
  return ImageFeatures(features, rows, pixels);
}

ImageFeatures::ImageFeatures(const FeaturesConfig& features, uint64_t rows,
                             int64_t pixels)
    : rows_count_(rows),
      levels_(features.levels),
      side_(features.pairs ? SquareSide(pixels) : 0),
      pixels_(pixels),
      ids_per_sample_(static_cast<int>(
          pixels + (side_ > 0 ? 2 * int64_t{side_} * (side_ - 1) : 0))) {}

void ImageFeatures::Featurize(const float* x, int n,
                              std::vector<uint64_t>* ids) {
  ids->resize(static_cast<size_t>(n) * ids_per_sample_);
  levels_of_.resize(pixels_);
  const uint32_t levels = static_cast<uint32_t>(levels_);
  for (int s = 0; s < n; ++s) {
    const float* image = x + static_cast<int64_t>(s) * pixels_;
    uint64_t* out = ids->data() + static_cast<size_t>(s) * ids_per_sample_;
    for (int64_t p = 0; p < pixels_; ++p) {
      const int q = static_cast<int>(image[p] * levels_);
      levels_of_[p] = static_cast<uint8_t>(std::clamp(q, 0, levels_ - 1));
      *out++ =
          FeatureId(0, static_cast<uint32_t>(p), levels_of_[p], rows_count_);
    }
    if (side_ == 0) continue;
    for (int r = 0; r < side_; ++r) {
      for (int c = 0; c < side_; ++c) {
        const uint32_t p = static_cast<uint32_t>(r * side_ + c);
        if (c + 1 < side_) {
          *out++ = FeatureId(1, p, levels_of_[p] * levels + levels_of_[p + 1],
                             rows_count_);
        }
        if (r + 1 < side_) {
          *out++ =
              FeatureId(2, p, levels_of_[p] * levels + levels_of_[p + side_],
                        rows_count_);
        }
      }
    }
  }
}

}  // namespace paramd
