#include "server/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {

SgdOptimizer::SgdOptimizer(LearningRateSchedule schedule, float momentum,
                           float weight_decay, bool nesterov)
    : schedule_(schedule),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {}

void SgdOptimizer::Apply(absl::Span<float> params,
                         absl::Span<const float> grad, float grad_scale,
                         absl::Span<std::vector<float>> slots,
                         int64_t step) const {
  const size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grad.data();
  const float lr = static_cast<float>(schedule_.At(step));
  const float wd = weight_decay_, mu = momentum_;
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

AdamOptimizer::AdamOptimizer(LearningRateSchedule schedule, float beta1,
                             float beta2, float eps, float weight_decay,
                             bool decoupled)
    : schedule_(schedule),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled) {}

void AdamOptimizer::Apply(absl::Span<float> params,
                          absl::Span<const float> grad, float grad_scale,
                          absl::Span<std::vector<float>> slots,
                          int64_t step) const {
  const size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grad.data();
  float* __restrict m = slots[0].data();
  float* __restrict v = slots[1].data();
  const double lr = schedule_.At(step);
  const double t = static_cast<double>(step);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1_, t)));
  const float inv_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2_, t)));
  const float b1 = beta1_, b2 = beta2_, eps = eps_;
  const float l2 = decoupled_ ? 0.0f : weight_decay_;
  const float shrink = decoupled_ ? static_cast<float>(1.0 - lr * weight_decay_) : 1.0f;
  for (size_t i = 0; i < n; ++i) {
    p[i] *= shrink;
    const float gi = g[i] * grad_scale + l2 * p[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

RmspropOptimizer::RmspropOptimizer(LearningRateSchedule schedule, float alpha,
                                   float eps, float momentum,
                                   float weight_decay)
    : schedule_(schedule),
      alpha_(alpha),
      eps_(eps),
      momentum_(momentum),
      weight_decay_(weight_decay) {}

void RmspropOptimizer::Apply(absl::Span<float> params,
                             absl::Span<const float> grad, float grad_scale,
                             absl::Span<std::vector<float>> slots,
                             int64_t step) const {
  const size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grad.data();
  float* __restrict v = slots[0].data();
  const float lr = static_cast<float>(schedule_.At(step));
  const float a = alpha_, eps = eps_, wd = weight_decay_, mu = momentum_;
  if (mu == 0) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * grad_scale + wd * p[i];
      v[i] = a * v[i] + (1.0f - a) * gi * gi;
      p[i] -= lr * gi / (std::sqrt(v[i]) + eps);
    }
    return;
  }
  float* __restrict b = slots[1].data();
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale + wd * p[i];
    v[i] = a * v[i] + (1.0f - a) * gi * gi;
    b[i] = mu * b[i] + gi / (std::sqrt(v[i]) + eps);
    p[i] -= lr * b[i];
  }
}

AdagradOptimizer::AdagradOptimizer(LearningRateSchedule schedule, float eps,
                                   float weight_decay)
    : schedule_(schedule), eps_(eps), weight_decay_(weight_decay) {}

void AdagradOptimizer::Apply(absl::Span<float> params,
                             absl::Span<const float> grad, float grad_scale,
                             absl::Span<std::vector<float>> slots,
                             int64_t step) const {
  const size_t n = params.size();
  float* __restrict p = params.data();
  const float* __restrict g = grad.data();
  float* __restrict s = slots[0].data();
  const float lr = static_cast<float>(schedule_.At(step));
  const float eps = eps_, wd = weight_decay_;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale + wd * p[i];
    s[i] += gi * gi;
    p[i] -= lr * gi / (std::sqrt(s[i]) + eps);
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(
    const OptimizerConfig& c) {
  const LearningRateSchedule schedule(c.learning_rate, c.schedule);
  const auto f = [](double v) { return static_cast<float>(v); };
  if (c.type == "sgd") {
    return std::make_unique<SgdOptimizer>(schedule, f(c.momentum),
                                          f(c.weight_decay), c.nesterov);
  }
  if (c.type == "adam" || c.type == "adamw") {
    return std::make_unique<AdamOptimizer>(schedule, f(c.beta1), f(c.beta2),
                                           f(c.eps), f(c.weight_decay),
                                           c.type == "adamw");
  }
  if (c.type == "rmsprop") {
    return std::make_unique<RmspropOptimizer>(schedule, f(c.alpha), f(c.eps),
                                              f(c.momentum), f(c.weight_decay));
  }
  if (c.type == "adagrad") {
    return std::make_unique<AdagradOptimizer>(schedule, f(c.eps),
                                              f(c.weight_decay));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer.type: unknown optimizer '", c.type, "'"));
}

}  // namespace paramd
