// Top-k gradient sparsification with error feedback (`compression:
// {type: topk, ratio, error_feedback}`).
//
// Per chunk of the partition plan a worker sends only the k entries of
// largest magnitude, k = max(1, ceil(ratio * chunk length)), as (index,
// value) pairs with the indices ascending. With error feedback the entries
// not sent stay behind in a residual the size of the model and are added
// to the next step's gradient before the next selection, so no gradient
// mass is lost, only delayed; without it they are dropped.
//
// Selection is deterministic: ties in magnitude go to the lower index.
// Plain C++, no gRPC; thread-compatible (one training loop uses it).
#ifndef PARAMD_WORKER_TOPK_H_
#define PARAMD_WORKER_TOPK_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace paramd {

// The number of entries a chunk of `length` sends at `ratio` in (0, 1].
int64_t TopKCount(int64_t length, double ratio);

// Writes the positions of the k largest-magnitude entries of `values` to
// `indices`, ascending (ties: the lower position wins). k is clamped to
// values.size().
void SelectTopK(absl::Span<const float> values, int64_t k,
                std::vector<uint32_t>* indices);

class TopKCompressor {
 public:
  // A chunk's selection: `indices` (ascending, within the chunk) and the
  // values sent there.
  struct Chunk {
    std::vector<uint32_t> indices;
    std::vector<float> values;
  };

  // `chunks` lists every chunk of the model as (flat offset, length);
  // `ratio` in (0, 1]. `momentum` > 0: momentum correction (below).
  TopKCompressor(std::vector<std::pair<int64_t, int64_t>> chunks, double ratio,
                 bool error_feedback, float momentum = 0);

  // Selects what to send of the flat gradient `grads` (the model's size):
  // out[i] for chunks[i]. With error feedback the residual is added first
  // and afterwards holds exactly what was not sent.
  void Compress(absl::Span<const float> grads, std::vector<Chunk>* out);

  // What was left unsent so far (all zero without error feedback).
  absl::Span<const float> residual() const { return residual_; }

 private:
  const std::vector<std::pair<int64_t, int64_t>> chunks_;
  const double ratio_;
  const bool error_feedback_;
  const float momentum_;
  std::vector<float> velocity_;  // Momentum correction only.
  std::vector<float> residual_;
  std::vector<float> scratch_;  // grads + residual, one chunk at a time.
};

}  // namespace paramd

#endif  // PARAMD_WORKER_TOPK_H_
