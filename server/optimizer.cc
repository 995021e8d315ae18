#include "server/optimizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {

SgdOptimizer::SgdOptimizer(float learning_rate, float momentum,
                           float weight_decay, bool nesterov)
    : lr_(learning_rate),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {}

void SgdOptimizer::Apply(absl::Span<float> params,
                         absl::Span<const float> grad, float grad_scale,
                         absl::Span<std::vector<float>> slots,
                         int64_t /*step*/) const {
  const size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grad.data();
  const float lr = lr_, wd = weight_decay_, mu = momentum_;
  if (mu == 0) {
    for (size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] * grad_scale + wd * p[i]);
    return;
  }
  float* __restrict v = slots[0].data();
  if (nesterov_) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * grad_scale + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (gi + mu * v[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + (g[i] * grad_scale + wd * p[i]);
      p[i] -= lr * v[i];
    }
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(
    const OptimizerConfig& config) {
  if (config.type == "sgd") {
    return std::make_unique<SgdOptimizer>(
        static_cast<float>(config.learning_rate),
        static_cast<float>(config.momentum),
        static_cast<float>(config.weight_decay), config.nesterov);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.type: unknown optimizer '", config.type, "'"));
}

}  // namespace paramd
