// Optimizers: the update rule a shard applies to one chunk of parameters.
//
// An Optimizer is stateless and thread-compatible; the per-chunk state it
// needs ("slots", e.g. SGD's momentum buffer) lives with the chunk and is
// passed in. No gRPC here: this is plain C++, unit-tested directly.
#ifndef PARAMD_SERVER_OPTIMIZER_H_
#define PARAMD_SERVER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/job_config.h"

namespace paramd {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // How many slot buffers (each the chunk's size) one chunk needs.
  virtual int num_slots() const = 0;

  // One step on `params` with gradient `grad * grad_scale`. `slots` holds
  // num_slots() buffers of params.size() elements, zero before the first
  // step. `step` counts from 1.
  virtual void Apply(absl::Span<float> params, absl::Span<const float> grad,
                     float grad_scale, absl::Span<std::vector<float>> slots,
                     int64_t step) const = 0;
};

// SGD with optional momentum, Nesterov momentum and L2 weight decay, as
// PyTorch's torch.optim.SGD with dampening 0:
//   g = grad * scale + weight_decay * p
//   v = momentum * v + g                 (when momentum > 0)
//   d = nesterov ? g + momentum * v : v  (d = g without momentum)
//   p = p - learning_rate * d
class SgdOptimizer : public Optimizer {
 public:
  SgdOptimizer(float learning_rate, float momentum, float weight_decay,
               bool nesterov);
  int num_slots() const override { return momentum_ > 0 ? 1 : 0; }
  void Apply(absl::Span<float> params, absl::Span<const float> grad,
             float grad_scale, absl::Span<std::vector<float>> slots,
             int64_t step) const override;

 private:
  const float lr_;
  const float momentum_;
  const float weight_decay_;
  const bool nesterov_;
};

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(
    const OptimizerConfig& config);

}  // namespace paramd

#endif  // PARAMD_SERVER_OPTIMIZER_H_
