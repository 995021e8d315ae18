// EmbeddingFront: a model's sparse front (common/config/layer_shapes.h's
// SparseFront) at run time. Each sample of a batch brings k ids (an image's
// hashed features, worker/model/image_features.h, or a click log's fields,
// worker/data/click_log_file.h); per batch the ids are de-duplicated, so
// the worker pulls and pushes each row once and holds only the batch's
// rows (memory bounded by the batch, never by the table). The rows
// combined are the dense layers' input:
//   embedding_bag     the mean (or sum) of a sample's k rows: dim values;
//   embedding_concat  its k = fields rows side by side, then its dense
//                     features (a click log's numeric columns) as they
//                     are: fields × dim + dense.
// Thread-compatible; one training loop uses it.
#ifndef PARAMD_WORKER_MODEL_EMBEDDING_FRONT_H_
#define PARAMD_WORKER_MODEL_EMBEDDING_FRONT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/config/layer_shapes.h"

namespace paramd {

class EmbeddingFront {
 public:
  explicit EmbeddingFront(const SparseFront& spec) : spec_(spec) {}

  int table() const { return spec_.table; }
  int dim() const { return spec_.dim; }
  // Values per sample of the combined rows (the dense layers' input).
  int width() const { return spec_.width(); }

  // The batch: ids [n × k], k ids per sample (for embedding_concat, k must
  // be its fields). De-duplicates them.
  absl::Status SetIds(absl::Span<const uint64_t> ids, int n, int k);
  // The batch's distinct ids, ascending: what to pull and push.
  absl::Span<const uint64_t> unique_ids() const { return unique_; }
  // Room for the pulled rows: dim floats per unique id.
  absl::Span<float> rows() { return absl::MakeSpan(rows_); }
  // h [n × width()]: each sample's combined rows, then its `dense`
  // features [n × spec.dense] (read only when the front has any).
  void Forward(const float* dense, float* h) const;
  // From dL/dh [n × width()], the gradient of each unique row: `row_grads`
  // (dim floats per unique id) is overwritten. The dense features' part of
  // dh is not read (they are data).
  void Backward(const float* dh, absl::Span<float> row_grads) const;

 private:
  const SparseFront spec_;
  int n_ = 0, k_ = 0;
  std::vector<uint32_t> local_;  // Each id's index in unique_.
  std::vector<uint64_t> unique_;
  std::vector<float> rows_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_EMBEDDING_FRONT_H_
