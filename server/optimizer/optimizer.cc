#include "server/optimizer/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

// Each kernel is built for AVX-512, AVX2 and the baseline; the loader picks
// the best the CPU has. The file is compiled with -ffp-contract=off: no
// clone fuses a multiply-add, so all of them round exactly alike. Under
// ThreadSanitizer, whose runtime is not up yet when the loader runs the
// clones' resolvers, only the baseline is built.
#if defined(__SANITIZE_THREAD__)
#define PARAMD_KERNEL
#else
#define PARAMD_KERNEL \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

PARAMD_KERNEL void SgdKernel(float* __restrict p, const float* __restrict g,
                             size_t n, float scale, float lr, float wd) {
  for (size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] * scale + wd * p[i]);
}

PARAMD_KERNEL void SgdMomentumKernel(float* __restrict p,
                                     const float* __restrict g,
                                     float* __restrict v, size_t n, float scale,
                                     float lr, float wd, float mu,
                                     bool nesterov) {
  if (nesterov) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (gi + mu * v[i]);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + (g[i] * scale + wd * p[i]);
      p[i] -= lr * v[i];
    }
  }
}

PARAMD_KERNEL void AdamKernel(float* __restrict p, const float* __restrict g,
                              float* __restrict m, float* __restrict v,
                              size_t n, float scale, float shrink, float l2,
                              float b1, float b2, float step_size,
                              float inv_sqrt_bc2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    p[i] *= shrink;
    const float gi = g[i] * scale + l2 * p[i];
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

PARAMD_KERNEL void RmspropKernel(float* __restrict p, const float* __restrict g,
                                 float* __restrict v, float* __restrict b,
                                 size_t n, float scale, float lr, float a,
                                 float eps, float wd, float mu) {
  if (b == nullptr) {
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] * scale + wd * p[i];
      v[i] = a * v[i] + (1.0f - a) * gi * gi;
      p[i] -= lr * gi / (std::sqrt(v[i]) + eps);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * scale + wd * p[i];
    v[i] = a * v[i] + (1.0f - a) * gi * gi;
    b[i] = mu * b[i] + gi / (std::sqrt(v[i]) + eps);
    p[i] -= lr * b[i];
  }
}

PARAMD_KERNEL void AdagradKernel(float* __restrict p, const float* __restrict g,
                                 float* __restrict s, size_t n, float scale,
                                 float lr, float eps, float wd) {
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * scale + wd * p[i];
    s[i] += gi * gi;
    p[i] -= lr * gi / (std::sqrt(s[i]) + eps);
  }
}

}  // namespace

SgdOptimizer::SgdOptimizer(LearningRateSchedule schedule, float momentum,
                           float weight_decay, bool nesterov)
    : schedule_(schedule),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {}

void SgdOptimizer::Apply(absl::Span<float> params, absl::Span<const float> grad,
                         float grad_scale, absl::Span<std::vector<float>> slots,
                         int64_t step) const {
  const float lr = static_cast<float>(schedule_.At(step));
  if (momentum_ == 0) {
    SgdKernel(params.data(), grad.data(), params.size(), grad_scale, lr,
              weight_decay_);
    return;
  }
  SgdMomentumKernel(params.data(), grad.data(), slots[0].data(), params.size(),
                    grad_scale, lr, weight_decay_, momentum_, nesterov_);
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
  const double lr = schedule_.At(step);
  const double t = static_cast<double>(step);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1_, t)));
  const float inv_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(beta2_, t)));
  const float l2 = decoupled_ ? 0.0f : weight_decay_;
  const float shrink =
      decoupled_ ? static_cast<float>(1.0 - lr * weight_decay_) : 1.0f;
  AdamKernel(params.data(), grad.data(), slots[0].data(), slots[1].data(),
             params.size(), grad_scale, shrink, l2, beta1_, beta2_, step_size,
             inv_sqrt_bc2, eps_);
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
  const float lr = static_cast<float>(schedule_.At(step));
  RmspropKernel(params.data(), grad.data(), slots[0].data(),
                momentum_ > 0 ? slots[1].data() : nullptr, params.size(),
                grad_scale, lr, alpha_, eps_, weight_decay_, momentum_);
}

AdagradOptimizer::AdagradOptimizer(LearningRateSchedule schedule, float eps,
                                   float weight_decay)
    : schedule_(schedule), eps_(eps), weight_decay_(weight_decay) {}

void AdagradOptimizer::Apply(absl::Span<float> params,
                             absl::Span<const float> grad, float grad_scale,
                             absl::Span<std::vector<float>> slots,
                             int64_t step) const {
  const float lr = static_cast<float>(schedule_.At(step));
  AdagradKernel(params.data(), grad.data(), slots[0].data(), params.size(),
                grad_scale, lr, eps_, weight_decay_);
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
