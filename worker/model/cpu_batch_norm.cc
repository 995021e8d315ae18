#include "worker/model/cpu_batch_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/base/status_macros.h"

namespace paramd {
namespace {

class BatchNorm : public CpuLayer {
 public:
  BatchNorm(const GraphLayer& l, const LayerTensors& tensors)
      : c_(l.in.c),
        plane_(int64_t{l.in.h} * l.in.w),
        momentum_(static_cast<float>(l.config.momentum)),
        eps_(l.config.eps),
        gamma_(tensors.offset("weight")),
        beta_(tensors.offset("bias")),
        mean_(tensors.offset("running_mean")),
        var_(tensors.offset("running_var")),
        // The four lie together (GraphModelSpec): the overlap hooks take
        // them as one range.
        begin_(std::min({gamma_, beta_, mean_, var_})),
        end_(std::max({gamma_, beta_, mean_, var_}) + c_) {}

  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    if (pass.hooks != nullptr) {
      RETURN_IF_ERROR(pass.hooks->await_params(begin_, end_));
    }
    const float* p = pass.params.data();
    const int64_t m = pass.n * plane_;  // Values per channel.
    if (pass.training) {
      xhat_.resize(pass.n * c_ * plane_);
      inv_std_.resize(c_);
      stat_delta_.resize(2 * c_);
    }
    for (int ch = 0; ch < c_; ++ch) {
      double mean, var;
      if (pass.training) {
        double sum = 0;
        ForEach(pass.n, ch, in, [&](const float v) { sum += v; });
        mean = sum / m;
        double sq = 0;
        ForEach(pass.n, ch, in,
                [&](const float v) { sq += (v - mean) * (v - mean); });
        var = sq / m;
        // The running statistics' change, pushed in Backward.
        const double unbiased = m > 1 ? sq / (m - 1) : var;
        stat_delta_[ch] = momentum_ * static_cast<float>(mean - p[mean_ + ch]);
        stat_delta_[c_ + ch] =
            momentum_ * static_cast<float>(unbiased - p[var_ + ch]);
      } else {
        mean = p[mean_ + ch];
        var = p[var_ + ch];
      }
      const float inv_std = static_cast<float>(1.0 / std::sqrt(var + eps_));
      const float fmean = static_cast<float>(mean);
      const float g = p[gamma_ + ch], b = p[beta_ + ch];
      if (pass.training) inv_std_[ch] = inv_std;
      for (int s = 0; s < pass.n; ++s) {
        const int64_t base = (int64_t{s} * c_ + ch) * plane_;
        for (int64_t i = 0; i < plane_; ++i) {
          const float xh = (in[base + i] - fmean) * inv_std;
          if (pass.training) xhat_[base + i] = xh;
          out[base + i] = g * xh + b;
        }
      }
    }
    return absl::OkStatus();
  }

  void Backward(const LayerPass& pass, const float*, const float*,
                const float* dout, float* din) override {
    const float* p = pass.params.data();
    float* grads = pass.grads.data();
    const int64_t m = pass.n * plane_;
    for (int ch = 0; ch < c_; ++ch) {
      double dbeta = 0, dgamma = 0;
      for (int s = 0; s < pass.n; ++s) {
        const int64_t base = (int64_t{s} * c_ + ch) * plane_;
        for (int64_t i = 0; i < plane_; ++i) {
          dbeta += dout[base + i];
          dgamma += dout[base + i] * xhat_[base + i];
        }
      }
      grads[gamma_ + ch] = static_cast<float>(dgamma);
      grads[beta_ + ch] = static_cast<float>(dbeta);
      grads[mean_ + ch] = stat_delta_[ch];
      grads[var_ + ch] = stat_delta_[c_ + ch];
      if (din == nullptr) continue;
      // dx = γ/σ · (dy − mean(dy) − x̂ · mean(dy · x̂)).
      const float scale = p[gamma_ + ch] * inv_std_[ch];
      const float mean_dy = static_cast<float>(dbeta / m);
      const float mean_dyx = static_cast<float>(dgamma / m);
      for (int s = 0; s < pass.n; ++s) {
        const int64_t base = (int64_t{s} * c_ + ch) * plane_;
        for (int64_t i = 0; i < plane_; ++i) {
          din[base + i] =
              scale * (dout[base + i] - mean_dy - xhat_[base + i] * mean_dyx);
        }
      }
    }
    if (pass.hooks != nullptr) pass.hooks->gradient_ready(begin_, end_);
  }

 private:
  // f(value) for channel ch's values of every sample.
  template <typename F>
  void ForEach(int n, int ch, const float* in, F&& f) const {
    for (int s = 0; s < n; ++s) {
      const float* v = in + (int64_t{s} * c_ + ch) * plane_;
      for (int64_t i = 0; i < plane_; ++i) f(v[i]);
    }
  }

  const int c_;
  const int64_t plane_;
  const float momentum_;
  const double eps_;
  const int64_t gamma_, beta_, mean_, var_;
  const int64_t begin_, end_;
  std::vector<float> xhat_;        // The training batch's normalised input.
  std::vector<float> inv_std_;     // Per channel: 1/sqrt(var + eps).
  std::vector<float> stat_delta_;  // The running mean's, then var's change.
};

}  // namespace

std::unique_ptr<CpuLayer> MakeCpuBatchNorm(const GraphLayer& layer,
                                           const LayerTensors& tensors) {
  return std::make_unique<BatchNorm>(layer, tensors);
}

}  // namespace paramd
