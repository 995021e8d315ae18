// Model: the MLP's forward and backward passes behind one interface, so
// that compute backends (cpu now; cuda next to it) are interchangeable.
//
// Parameters and gradients are flat float buffers: the model spec's tensors
// concatenated in order (FlatLayout gives each tensor's offset). A Model
// holds scratch buffers, so one instance is used by one thread at a time.
#ifndef PARAMD_WORKER_MODEL_H_
#define PARAMD_WORKER_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job_config.h"
#include "common/model_spec.h"

namespace paramd {

// Offsets of each tensor in the flat parameter buffer.
struct FlatLayout {
  explicit FlatLayout(const ModelSpec& spec);
  std::vector<int64_t> offset;  // By tensor id.
  int64_t total = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  // Which backend runs this model, e.g. "cpu (OpenBLAS, 1 thread)".
  virtual std::string Describe() const = 0;

  // Mean softmax cross-entropy over the batch x [n × inputs], labels y;
  // writes d(loss)/d(params) into `grads` (same layout as `params`).
  virtual absl::StatusOr<double> ComputeGradients(
      absl::Span<const float> params, const float* x, const int32_t* y, int n,
      absl::Span<float> grads) = 0;

  // How many of the n samples the model classifies correctly.
  virtual absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                               const float* x,
                                               const int32_t* y, int n) = 0;
};

// The model for `config` on the device the job asks for (worker.device):
// "cpu"; "cuda" (an error naming the reason when no device can be used);
// "auto", CUDA when a device can be used and otherwise the CPU, logging one
// line that says which and why. `max_batch` sizes the scratch buffers:
// larger training batches are refused, larger evaluations split.
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JobConfig& config,
                                                 int max_batch);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_H_
