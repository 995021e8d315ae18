#include "worker/model/embedding_bag.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/base/mix.h"
#include "common/model/rows.h"

namespace paramd {
namespace {

int SquareSide(int64_t pixels) {
  const int side = static_cast<int>(std::lround(std::sqrt(pixels)));
  return int64_t{side} * side == pixels ? side : 0;
}

}  // namespace

uint64_t EmbeddingBag::FeatureId(uint32_t kind, uint32_t position,
                                 uint32_t value, uint64_t rows) {
  const uint64_t key =
      (uint64_t{kind} << 56) ^ (uint64_t{position} << 24) ^ value;
  return Mix(key) % rows;
}

absl::StatusOr<EmbeddingBag> EmbeddingBag::Create(const ModelConfig& model,
                                                  int64_t pixels) {
  if (model.type != ModelType::kEmbeddingBag || model.embeddings.size() != 1) {
    return absl::InvalidArgumentError(
        "EmbeddingBag: model.type embedding_bag with one table expected");
  }
  if (pixels < 1 || pixels > (1 << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingBag: images of ", pixels, " pixels"));
  }
  return EmbeddingBag(model, pixels);
}

EmbeddingBag::EmbeddingBag(const ModelConfig& model, int64_t pixels)
    : dim_(model.embeddings[0].dim),
      rows_count_(model.embeddings[0].rows),
      levels_(model.features.levels),
      mean_(model.features.combiner == "mean"),
      side_(model.features.pairs ? SquareSide(pixels) : 0),
      pixels_(pixels),
      ids_per_sample_(static_cast<int>(
          pixels + (side_ > 0 ? 2 * int64_t{side_} * (side_ - 1) : 0))) {}

void EmbeddingBag::Featurize(const float* x, int n) {
  n_ = n;
  ids_.resize(static_cast<size_t>(n) * ids_per_sample_);
  levels_of_.resize(pixels_);
  const uint32_t levels = static_cast<uint32_t>(levels_);
  for (int s = 0; s < n; ++s) {
    const float* image = x + static_cast<int64_t>(s) * pixels_;
    uint64_t* out = &ids_[static_cast<size_t>(s) * ids_per_sample_];
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
  // De-duplicate: sort the distinct ids, then map each id to its place.
  DeduplicateIds(ids_, &unique_, &local_);
  rows_.resize(unique_.size() * dim_);
}

void EmbeddingBag::Forward(float* h) const {
  const float scale = mean_ ? 1.0f / ids_per_sample_ : 1.0f;
  for (int s = 0; s < n_; ++s) {
    float* out = h + static_cast<int64_t>(s) * dim_;
    std::fill(out, out + dim_, 0.0f);
    const uint32_t* local = &local_[static_cast<size_t>(s) * ids_per_sample_];
    for (int j = 0; j < ids_per_sample_; ++j) {
      const float* row = &rows_[static_cast<size_t>(local[j]) * dim_];
      for (int d = 0; d < dim_; ++d) out[d] += row[d];
    }
    for (int d = 0; d < dim_; ++d) out[d] *= scale;
  }
}

void EmbeddingBag::Backward(const float* dh,
                            absl::Span<float> row_grads) const {
  const float scale = mean_ ? 1.0f / ids_per_sample_ : 1.0f;
  std::fill(row_grads.begin(), row_grads.end(), 0.0f);
  for (int s = 0; s < n_; ++s) {
    const float* g = dh + static_cast<int64_t>(s) * dim_;
    const uint32_t* local = &local_[static_cast<size_t>(s) * ids_per_sample_];
    for (int j = 0; j < ids_per_sample_; ++j) {
      float* out = &row_grads[static_cast<size_t>(local[j]) * dim_];
      for (int d = 0; d < dim_; ++d) out[d] += g[d] * scale;
    }
  }
}

}  // namespace paramd
