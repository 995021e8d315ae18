#include "worker/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>

namespace paramd {

int64_t TopKCount(int64_t length, double ratio) {
  const int64_t k = static_cast<int64_t>(std::ceil(ratio * length));
  return std::clamp<int64_t>(k, 1, std::max<int64_t>(length, 1));
}

void SelectTopK(absl::Span<const float> values, int64_t k,
                std::vector<uint32_t>* indices) {
  const int64_t n = static_cast<int64_t>(values.size());
  k = std::clamp<int64_t>(k, 0, n);
  indices->clear();
  if (k == 0) return;
  // Magnitudes as the bits of |v|: for floats without sign, integer order
  // is numeric order, and NaN's bits lie above infinity's, so NaN counts
  // as the largest (it is sent and refused by the server as in a dense
  // push, never kept back in a residual). Integer loops vectorise.
  std::vector<uint32_t> key(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof(bits));
    key[i] = bits & 0x7fffffffu;
  }
  // A threshold from a sample, low enough that about 2k entries reach it;
  // when at least k do, the top k are among them and only they are ranked
  // (else every entry is).
  uint32_t threshold = 0;
  if (k < n / 4) {
    const int64_t stride = std::max<int64_t>(1, n / 1024);
    std::vector<uint32_t> sample;
    for (int64_t i = 0; i < n; i += stride) sample.push_back(key[i]);
    const auto q = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(sample.size()) - 1,
                          2 * k * static_cast<int64_t>(sample.size()) / n));
    std::nth_element(sample.begin(), sample.begin() + q, sample.end(),
                     std::greater<uint32_t>());
    threshold = sample[q];
    int64_t reach = 0;
    for (int64_t i = 0; i < n; ++i) reach += key[i] >= threshold;
    if (reach < k) threshold = 0;
  }
  // Candidates in ascending position; ranked by magnitude, then by lower
  // position, so ties resolve the same on every machine.
  std::vector<std::pair<uint32_t, uint32_t>> candidates;  // (key, position)
  for (int64_t i = 0; i < n; ++i) {
    if (key[i] >= threshold) {
      candidates.emplace_back(key[i], static_cast<uint32_t>(i));
    }
  }
  if (static_cast<int64_t>(candidates.size()) > k) {
    std::nth_element(candidates.begin(), candidates.begin() + (k - 1),
                     candidates.end(), [](const auto& a, const auto& b) {
                       return a.first > b.first ||
                              (a.first == b.first && a.second < b.second);
                     });
    candidates.resize(static_cast<size_t>(k));
  }
  indices->reserve(candidates.size());
  for (const auto& c : candidates) indices->push_back(c.second);
  std::sort(indices->begin(), indices->end());
}

TopKCompressor::TopKCompressor(std::vector<std::pair<int64_t, int64_t>> chunks,
                               double ratio, bool error_feedback,
                               float momentum)
    : chunks_(std::move(chunks)),
      ratio_(ratio),
      error_feedback_(error_feedback),
      momentum_(momentum) {
  int64_t total = 0;
  for (const auto& [offset, length] : chunks_) {
    total = std::max(total, offset + length);
  }
  residual_.assign(static_cast<size_t>(total), 0.0f);
  if (momentum_ > 0) velocity_.assign(static_cast<size_t>(total), 0.0f);
}

void TopKCompressor::Compress(absl::Span<const float> grads,
                              std::vector<Chunk>* out) {
  out->resize(chunks_.size());
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const auto [offset, length] = chunks_[c];
    scratch_.resize(static_cast<size_t>(length));
    float* residual = residual_.data() + offset;
    if (momentum_ > 0) {
      float* velocity = velocity_.data() + offset;
      for (int64_t i = 0; i < length; ++i) {
        velocity[i] = momentum_ * velocity[i] + grads[offset + i];
        scratch_[i] = velocity[i] + residual[i];
      }
    } else {
      for (int64_t i = 0; i < length; ++i) {
        scratch_[i] = grads[offset + i] + residual[i];
      }
    }
    Chunk& chunk = (*out)[c];
    SelectTopK(scratch_, TopKCount(length, ratio_), &chunk.indices);
    chunk.values.resize(chunk.indices.size());
    for (size_t j = 0; j < chunk.indices.size(); ++j) {
      chunk.values[j] = scratch_[chunk.indices[j]];
      scratch_[chunk.indices[j]] = 0.0f;  // Sent: nothing of it stays.
      // Momentum factor masking: a sent entry's velocity starts over.
      if (momentum_ > 0) velocity_[offset + chunk.indices[j]] = 0.0f;
    }
    if (error_feedback_) {
      std::copy(scratch_.begin(), scratch_.end(), residual);
    }
  }
}

}  // namespace paramd
