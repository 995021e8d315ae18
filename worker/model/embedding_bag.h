// EmbeddingBag: an embedding_bag model's sparse front (model.type
// embedding_bag): each image becomes hashed feature ids, each sample the
// mean (or sum) of its ids' rows of the table, which feeds the MLP.
//
// Features of a side × side image with pixels in [0, 1], each intensity
// quantised to q = min(levels - 1, ⌊v · levels⌋): one id per pixel
// (position, q), and with `pairs` one per horizontal and per vertical
// neighbour pair (position, q₁, q₂), each hashed into [0, rows). Per batch
// the ids are de-duplicated: the worker pulls and pushes each row once,
// and holds only the batch's rows (memory bounded by the batch, never by
// the table). Thread-compatible; one training loop uses it.
#ifndef PARAMD_WORKER_MODEL_EMBEDDING_BAG_H_
#define PARAMD_WORKER_MODEL_EMBEDDING_BAG_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"

namespace paramd {

class EmbeddingBag {
 public:
  // For images of `pixels` values (a square of side √pixels; without a
  // square, no pairs).
  static absl::StatusOr<EmbeddingBag> Create(const ModelConfig& model,
                                             int64_t pixels);

  int dim() const { return dim_; }
  // The ids one image contributes (before de-duplication).
  int ids_per_sample() const { return ids_per_sample_; }

  // Computes the ids of images x [n × pixels] and de-duplicates them.
  void Featurize(const float* x, int n);
  // The batch's distinct ids, ascending: what to pull and push.
  absl::Span<const uint64_t> unique_ids() const { return unique_; }
  // Room for the pulled rows: dim floats per unique id.
  absl::Span<float> rows() { return absl::MakeSpan(rows_); }
  // h [n × dim]: each sample's combined rows.
  void Forward(float* h) const;
  // From dL/dh [n × dim], the gradient of each unique row: `row_grads`
  // (dim floats per unique id) is overwritten.
  void Backward(const float* dh, absl::Span<float> row_grads) const;

  // The hashed id of feature (kind, position, value) in a table of `rows`.
  static uint64_t FeatureId(uint32_t kind, uint32_t position, uint32_t value,
                            uint64_t rows);

 private:
  EmbeddingBag(const ModelConfig& model, int64_t pixels);

  const int dim_;
  const uint64_t rows_count_;
  const int levels_;
  const bool mean_;
  const int side_;  // 0: not square, no pairs.
  const int64_t pixels_;
  const int ids_per_sample_;
  int n_ = 0;
  std::vector<uint64_t> ids_;    // n × ids_per_sample
  std::vector<uint32_t> local_;  // Each id's index in unique_.
  std::vector<uint64_t> unique_;
  std::vector<float> rows_;
  std::vector<uint8_t> levels_of_;  // Scratch: a sample's quantised pixels.
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_EMBEDDING_BAG_H_
