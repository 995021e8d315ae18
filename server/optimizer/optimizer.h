// Optimizers: the update rule a shard applies to one chunk of parameters.
//
// The update loops are element-wise and built for several instruction sets
// (chosen when the process loads) without fused multiply-add, so every
// machine computes bit-identical results.
//
// An Optimizer is stateless and thread-compatible; the per-chunk state it
// needs ("slots", e.g. SGD's momentum buffer) lives with the chunk and is
// passed in. No gRPC here: this is plain C++, unit-tested directly.
#ifndef PARAMD_SERVER_OPTIMIZER_OPTIMIZER_H_
#define PARAMD_SERVER_OPTIMIZER_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "server/optimizer/lr_schedule.h"

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

// Every optimizer follows PyTorch's torch.optim definition of the same name
// (defaults as there), with g = grad * grad_scale and lr = schedule.At(step).

// SGD with optional momentum, Nesterov momentum and L2 weight decay
// (dampening 0):
//   g += weight_decay * p
//   v = momentum * v + g                 (when momentum > 0)
//   d = nesterov ? g + momentum * v : v  (d = g without momentum)
//   p -= lr * d
class SgdOptimizer : public Optimizer {
 public:
  SgdOptimizer(LearningRateSchedule schedule, float momentum,
               float weight_decay, bool nesterov);
  int num_slots() const override { return momentum_ > 0 ? 1 : 0; }
  void Apply(absl::Span<float> params, absl::Span<const float> grad,
             float grad_scale, absl::Span<std::vector<float>> slots,
             int64_t step) const override;

 private:
  const LearningRateSchedule schedule_;
  const float momentum_;
  const float weight_decay_;
  const bool nesterov_;
};

// Adam (decoupled = false) and AdamW (decoupled = true):
//   Adam:  g += weight_decay * p        AdamW: p *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g²
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Slots: m, v.
class AdamOptimizer : public Optimizer {
 public:
  AdamOptimizer(LearningRateSchedule schedule, float beta1, float beta2,
                float eps, float weight_decay, bool decoupled);
  int num_slots() const override { return 2; }
  void Apply(absl::Span<float> params, absl::Span<const float> grad,
             float grad_scale, absl::Span<std::vector<float>> slots,
             int64_t step) const override;

 private:
  const LearningRateSchedule schedule_;
  const float beta1_, beta2_, eps_, weight_decay_;
  const bool decoupled_;
};

// RMSprop (not centered):
//   g += weight_decay * p;  v = alpha * v + (1 - alpha) * g²
//   d = g / (sqrt(v) + eps)
//   with momentum: b = momentum * b + d; p -= lr * b   else p -= lr * d
// Slots: v (and b with momentum).
class RmspropOptimizer : public Optimizer {
 public:
  RmspropOptimizer(LearningRateSchedule schedule, float alpha, float eps,
                   float momentum, float weight_decay);
  int num_slots() const override { return momentum_ > 0 ? 2 : 1; }
  void Apply(absl::Span<float> params, absl::Span<const float> grad,
             float grad_scale, absl::Span<std::vector<float>> slots,
             int64_t step) const override;

 private:
  const LearningRateSchedule schedule_;
  const float alpha_, eps_, momentum_, weight_decay_;
};

// Adagrad (no lr decay, accumulator starting at 0):
//   g += weight_decay * p;  s += g²;  p -= lr * g / (sqrt(s) + eps)
// Slot: s.
class AdagradOptimizer : public Optimizer {
 public:
  AdagradOptimizer(LearningRateSchedule schedule, float eps,
                   float weight_decay);
  int num_slots() const override { return 1; }
  void Apply(absl::Span<float> params, absl::Span<const float> grad,
             float grad_scale, absl::Span<std::vector<float>> slots,
             int64_t step) const override;

 private:
  const LearningRateSchedule schedule_;
  const float eps_, weight_decay_;
};

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(
    const OptimizerConfig& config);

}  // namespace paramd

#endif  // PARAMD_SERVER_OPTIMIZER_OPTIMIZER_H_
