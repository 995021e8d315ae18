#include "worker/model/embedding_front.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/model/rows.h"

namespace paramd {

absl::Status EmbeddingFront::SetIds(absl::Span<const uint64_t> ids, int n,
                                    int k) {
  if (n < 0 || k < 1 || ids.size() != static_cast<size_t>(n) * k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EmbeddingFront: ", ids.size(), " ids for ", n, " samples of ", k));
  }
  if (spec_.kind == LayerKind::kEmbeddingConcat && k != spec_.fields) {
    return absl::InvalidArgumentError(
        absl::StrCat("EmbeddingFront: ", k,
                     " ids per sample; the "
                     "embedding_concat layer reads ",
                     spec_.fields, " fields"));
  }
  n_ = n;
  k_ = k;
  DeduplicateIds(ids, &unique_, &local_);
  rows_.resize(unique_.size() * spec_.dim);
  return absl::OkStatus();
}

void EmbeddingFront::Forward(const float* dense, float* h) const {
  const int dim = spec_.dim;
  if (spec_.kind == LayerKind::kEmbeddingConcat) {
    const int64_t width = spec_.width();
    for (int s = 0; s < n_; ++s) {
      float* out = h + s * width;
      const uint32_t* local = &local_[static_cast<size_t>(s) * k_];
      for (int j = 0; j < k_; ++j) {
        const float* row = &rows_[static_cast<size_t>(local[j]) * dim];
        std::copy(row, row + dim, out + j * dim);
      }
      if (spec_.dense > 0) {
        const float* x = dense + static_cast<int64_t>(s) * spec_.dense;
        std::copy(x, x + spec_.dense, out + int64_t{k_} * dim);
      }
    }
    return;
  }
  const float scale = spec_.mean ? 1.0f / k_ : 1.0f;
  for (int s = 0; s < n_; ++s) {
    float* out = h + static_cast<int64_t>(s) * dim;
    std::fill(out, out + dim, 0.0f);
    const uint32_t* local = &local_[static_cast<size_t>(s) * k_];
    for (int j = 0; j < k_; ++j) {
      const float* row = &rows_[static_cast<size_t>(local[j]) * dim];
      for (int d = 0; d < dim; ++d) out[d] += row[d];
    }
    for (int d = 0; d < dim; ++d) out[d] *= scale;
  }
}

void EmbeddingFront::Backward(const float* dh,
                              absl::Span<float> row_grads) const {
  const int dim = spec_.dim;
  std::fill(row_grads.begin(), row_grads.end(), 0.0f);
  if (spec_.kind == LayerKind::kEmbeddingConcat) {
    // Each place a row stands in h adds its slice of dh.
    const int64_t width = spec_.width();
    for (int s = 0; s < n_; ++s) {
      const uint32_t* local = &local_[static_cast<size_t>(s) * k_];
      for (int f = 0; f < k_; ++f) {
        float* g = &row_grads[static_cast<size_t>(local[f]) * dim];
        const float* d = dh + s * width + int64_t{f} * dim;
        for (int j = 0; j < dim; ++j) g[j] += d[j];
      }
    }
    return;
  }
  const float scale = spec_.mean ? 1.0f / k_ : 1.0f;
  for (int s = 0; s < n_; ++s) {
    const float* g = dh + static_cast<int64_t>(s) * dim;
    const uint32_t* local = &local_[static_cast<size_t>(s) * k_];
    for (int j = 0; j < k_; ++j) {
      float* out = &row_grads[static_cast<size_t>(local[j]) * dim];
      for (int d = 0; d < dim; ++d) out[d] += g[d] * scale;
    }
  }
}

}  // namespace paramd
