#include "worker/model/cpu_layers.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "common/base/status_macros.h"
#include "worker/model/cpu_batch_norm.h"
#include "worker/model/cpu_conv2d.h"

namespace paramd {
namespace {

// out = in · W + b, W [in × out] row-major.
class Dense : public CpuLayer {
 public:
  Dense(const GraphLayer& l, const LayerTensors& tensors, const Blas* blas)
      : fan_in_(static_cast<int>(l.in.size())),
        fan_out_(l.out.c),
        weight_(tensors.offset("weight")),
        bias_(tensors.offset("bias")),
        blas_(blas) {}

  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    const int n = pass.n;
    const StepHooks* hooks = pass.hooks;
    const float* b = pass.params.data() + bias_;
    // Without hooks b is broadcast first and one SGEMM adds onto it; with
    // them one product per piece of W's rows (input features) adds on as
    // its rows arrive, and b (which travels after W) last.
    if (hooks == nullptr) {
      for (int i = 0; i < n; ++i) {
        std::copy(b, b + fan_out_, out + static_cast<int64_t>(i) * fan_out_);
      }
    } else {
      std::fill(out, out + int64_t{n} * fan_out_, 0.0f);
    }
    const int rows = RowsPerPiece(hooks);
    for (int r = 0; r < fan_in_; r += rows) {
      const int m = std::min(rows, fan_in_ - r);
      const int64_t w = weight_ + int64_t{r} * fan_out_;
      if (hooks != nullptr) {
        RETURN_IF_ERROR(hooks->await_params(w, w + int64_t{m} * fan_out_));
      }
      blas_->Sgemm(false, false, n, fan_out_, m, 1.0f, in + r, fan_in_,
                   pass.params.data() + w, fan_out_, 1.0f, out, fan_out_);
    }
    if (hooks != nullptr) {
      RETURN_IF_ERROR(hooks->await_params(bias_, bias_ + fan_out_));
      for (int i = 0; i < n; ++i) {
        float* row = out + static_cast<int64_t>(i) * fan_out_;
        for (int j = 0; j < fan_out_; ++j) row[j] += b[j];
      }
    }
    return absl::OkStatus();
  }

  void Backward(const LayerPass& pass, const float* in, const float* out,
                const float* dout, float* din) override {
    const int n = pass.n;
    const StepHooks* hooks = pass.hooks;
    // db = column sums of dout.
    float* db = pass.grads.data() + bias_;
    std::fill(db, db + fan_out_, 0.0f);
    for (int i = 0; i < n; ++i) {
      const float* row = dout + static_cast<int64_t>(i) * fan_out_;
      for (int j = 0; j < fan_out_; ++j) db[j] += row[j];
    }
    if (hooks != nullptr) hooks->gradient_ready(bias_, bias_ + fan_out_);
    // dW = inᵀ · dout; with hooks by pieces of rows, each handed on as
    // soon as it is computed.
    const int rows = RowsPerPiece(hooks);
    for (int r = 0; r < fan_in_; r += rows) {
      const int m = std::min(rows, fan_in_ - r);
      const int64_t w = weight_ + int64_t{r} * fan_out_;
      blas_->Sgemm(true, false, m, fan_out_, n, 1.0f, in + r, fan_in_, dout,
                   fan_out_, 0.0f, pass.grads.data() + w, fan_out_);
      if (hooks != nullptr) hooks->gradient_ready(w, w + int64_t{m} * fan_out_);
    }
    // din = dout · Wᵀ.
    if (din != nullptr) {
      blas_->Sgemm(false, true, n, fan_in_, fan_out_, 1.0f, dout, fan_out_,
                   pass.params.data() + weight_, fan_out_, 0.0f, din, fan_in_);
    }
  }

 private:
  // Rows of the weight per piece under `hooks` (all without).
  int RowsPerPiece(const StepHooks* hooks) const {
    if (hooks == nullptr || hooks->piece <= 0) return fan_in_;
    return static_cast<int>(
        std::clamp<int64_t>(hooks->piece / fan_out_, 1, fan_in_));
  }

  const int fan_in_, fan_out_;
  const int64_t weight_, bias_;
  const Blas* const blas_;
};

// DLRM's bottom MLP, a layer at a time: of each sample's values, the
// first `passthrough` (the fields' rows) go through as they are, and the
// rest x (the dense features, or the previous bottom_dense's output)
// become relu(x · W + b), W [in × out] row-major.
class BottomDense : public CpuLayer {
 public:
  BottomDense(const GraphLayer& l, const LayerTensors& tensors,
              const Blas* blas)
      : pass_(l.passthrough),
        in_width_(static_cast<int>(l.in.size())),
        out_width_(static_cast<int>(l.out.size())),
        fan_in_(in_width_ - pass_),
        fan_out_(l.config.out),
        weight_(tensors.offset("weight")),
        bias_(tensors.offset("bias")),
        blas_(blas) {}

  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    if (pass.hooks != nullptr) {
      RETURN_IF_ERROR(pass.hooks->await_params(
          weight_, weight_ + int64_t{fan_in_} * fan_out_));
      RETURN_IF_ERROR(pass.hooks->await_params(bias_, bias_ + fan_out_));
    }
    const float* b = pass.params.data() + bias_;
    for (int i = 0; i < pass.n; ++i) {
      const float* x = in + static_cast<int64_t>(i) * in_width_;
      float* y = out + static_cast<int64_t>(i) * out_width_;
      std::copy(x, x + pass_, y);
      std::copy(b, b + fan_out_, y + pass_);
    }
    blas_->Sgemm(false, false, pass.n, fan_out_, fan_in_, 1.0f, in + pass_,
                 in_width_, pass.params.data() + weight_, fan_out_, 1.0f,
                 out + pass_, out_width_);
    for (int i = 0; i < pass.n; ++i) {
      float* y = out + static_cast<int64_t>(i) * out_width_ + pass_;
      for (int j = 0; j < fan_out_; ++j) y[j] = y[j] < 0.0f ? 0.0f : y[j];
    }
    return absl::OkStatus();
  }

  void Backward(const LayerPass& pass, const float* in, const float* out,
                const float* dout, float* din) override {
    const int n = pass.n;
    // d = dout's transformed part where the ReLU let it through.
    delta_.resize(static_cast<size_t>(n) * fan_out_);
    float* db = pass.grads.data() + bias_;
    std::fill(db, db + fan_out_, 0.0f);
    for (int i = 0; i < n; ++i) {
      const int64_t at = static_cast<int64_t>(i) * out_width_ + pass_;
      float* d = &delta_[static_cast<size_t>(i) * fan_out_];
      for (int j = 0; j < fan_out_; ++j) {
        d[j] = out[at + j] <= 0.0f ? 0.0f : dout[at + j];
        db[j] += d[j];
      }
    }
    // dW = xᵀ · d.
    blas_->Sgemm(true, false, fan_in_, fan_out_, n, 1.0f, in + pass_, in_width_,
                 delta_.data(), fan_out_, 0.0f, pass.grads.data() + weight_,
                 fan_out_);
    if (pass.hooks != nullptr) {
      pass.hooks->gradient_ready(bias_, bias_ + fan_out_);
      pass.hooks->gradient_ready(weight_,
                                 weight_ + int64_t{fan_in_} * fan_out_);
    }
    if (din == nullptr) return;
    // din: the passed-through part as it came, the rest d · Wᵀ.
    for (int i = 0; i < n; ++i) {
      const float* g = dout + static_cast<int64_t>(i) * out_width_;
      std::copy(g, g + pass_, din + static_cast<int64_t>(i) * in_width_);
    }
    blas_->Sgemm(false, true, n, fan_in_, fan_out_, 1.0f, delta_.data(),
                 fan_out_, pass.params.data() + weight_, fan_out_, 0.0f,
                 din + pass_, in_width_);
  }

 private:
  const int pass_, in_width_, out_width_, fan_in_, fan_out_;
  const int64_t weight_, bias_;
  const Blas* const blas_;
  std::vector<float> delta_;
};

// Shape-preserving layers work element by element on n × size floats.
class Elementwise : public CpuLayer {
 public:
  explicit Elementwise(const GraphLayer& l) : size_(l.in.size()) {}

 protected:
  int64_t count(const LayerPass& pass) const { return pass.n * size_; }
  const int64_t size_;
};

class Relu : public Elementwise {
 public:
  using Elementwise::Elementwise;
  // Both loops are selects over distinct buffers (restrict, every operand
  // loaded unconditionally) so that they vectorise without branches.
  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    const int64_t count = this->count(pass);
    const float* __restrict x = in;
    float* __restrict y = out;
    for (int64_t i = 0; i < count; ++i) {
      const float v = x[i];
      y[i] = v < 0.0f ? 0.0f : v;
    }
    return absl::OkStatus();
  }
  void Backward(const LayerPass& pass, const float*, const float* out,
                const float* dout, float* din) override {
    if (din == nullptr) return;
    const int64_t count = this->count(pass);
    const float* __restrict y = out;
    const float* __restrict g = dout;
    float* __restrict d = din;
    for (int64_t i = 0; i < count; ++i) {
      const float gi = g[i];
      d[i] = y[i] <= 0.0f ? 0.0f : gi;
    }
  }
};

// Inverted dropout: kept elements are scaled by 1/(1-p) while training, so
// evaluation passes values through unchanged.
class Dropout : public Elementwise {
 public:
  explicit Dropout(const GraphLayer& l)
      : Elementwise(l),
        p_(l.config.p),
        scale_(static_cast<float>(1.0 / (1.0 - l.config.p))) {}
  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    Apply(pass, in, out);
    return absl::OkStatus();
  }
  void Backward(const LayerPass& pass, const float*, const float*,
                const float* dout, float* din) override {
    if (din != nullptr) Apply(pass, dout, din);
  }

 private:
  // dst = src ⊙ mask / (1-p); the mask is recomputed, not stored.
  void Apply(const LayerPass& pass, const float* src, float* dst) const {
    if (!pass.training || p_ == 0) {
      std::copy(src, src + count(pass), dst);
      return;
    }
    for (int s = 0; s < pass.n; ++s) {
      const int64_t base = s * size_;
      for (int64_t i = 0; i < size_; ++i) {
        dst[base + i] =
            DropoutKeeps(pass.seed, s, i, p_) ? src[base + i] * scale_ : 0.0f;
      }
    }
  }
  const double p_;
  const float scale_;
};

// C×H×W read as one flat vector: the same floats.
class Flatten : public Elementwise {
 public:
  using Elementwise::Elementwise;
  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    std::copy(in, in + count(pass), out);
    return absl::OkStatus();
  }
  void Backward(const LayerPass& pass, const float*, const float*,
                const float* dout, float* din) override {
    if (din != nullptr) std::copy(dout, dout + count(pass), din);
  }
};

// Max or mean over kernel × kernel windows at a stride, per channel; no
// padding, so every window lies inside the image.
class Pool2d : public CpuLayer {
 public:
  Pool2d(const GraphLayer& l, bool max)
      : max_(max),
        k_(l.config.kernel),
        s_(l.config.stride),
        in_(l.in),
        out_(l.out) {}

  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    if (max_) {
      argmax_.resize(int64_t{pass.n} * in_.c * out_.h * out_.w);
      ForwardPlanes<true>(pass.n, in, out);
    } else {
      ForwardPlanes<false>(pass.n, in, out);
    }
    return absl::OkStatus();
  }

  void Backward(const LayerPass& pass, const float*, const float*,
                const float* dout, float* din) override {
    if (din == nullptr) return;
    const int64_t planes = int64_t{pass.n} * in_.c;
    const int64_t in_plane = int64_t{in_.h} * in_.w;
    const int64_t out_plane = int64_t{out_.h} * out_.w;
    std::fill(din, din + planes * in_plane, 0.0f);
    const float inv = 1.0f / static_cast<float>(k_ * k_);
    for (int64_t p = 0; p < planes; ++p) {
      const float* g = dout + p * out_plane;
      float* dst = din + p * in_plane;
      if (max_) {
        const int32_t* at = argmax_.data() + p * out_plane;
        for (int64_t o = 0; o < out_plane; ++o) dst[at[o]] += g[o];
        continue;
      }
      for (int oy = 0; oy < out_.h; ++oy) {
        for (int ox = 0; ox < out_.w; ++ox) {
          const float v = g[int64_t{oy} * out_.w + ox] * inv;
          for (int ky = 0; ky < k_; ++ky) {
            float* row = dst + int64_t{oy * s_ + ky} * in_.w + ox * s_;
            for (int kx = 0; kx < k_; ++kx) row[kx] += v;
          }
        }
      }
    }
  }

 private:
  // Each window's maximum (and where it is, into argmax_) or mean, for
  // `n` samples: one loop per kind, so neither does the other's work.
  template <bool kMax>
  void ForwardPlanes(int n, const float* in, float* out) {
    const int64_t planes = int64_t{n} * in_.c;
    const int64_t in_plane = int64_t{in_.h} * in_.w;
    const int64_t out_plane = int64_t{out_.h} * out_.w;
    const float inv = 1.0f / static_cast<float>(k_ * k_);
    for (int64_t p = 0; p < planes; ++p) {
      const float* src = in + p * in_plane;
      float* dst = out + p * out_plane;
      for (int oy = 0; oy < out_.h; ++oy) {
        for (int ox = 0; ox < out_.w; ++ox) {
          float best = -std::numeric_limits<float>::infinity(), sum = 0;
          int32_t at = 0;
          for (int ky = 0; ky < k_; ++ky) {
            const int64_t row = int64_t{oy * s_ + ky} * in_.w + ox * s_;
            for (int kx = 0; kx < k_; ++kx) {
              const float v = src[row + kx];
              if constexpr (kMax) {
                // Selects, not a branch: which value wins is data.
                const bool better = v > best;
                best = better ? v : best;
                at = better ? static_cast<int32_t>(row + kx) : at;
              } else {
                sum += v;
              }
            }
          }
          const int64_t o = int64_t{oy} * out_.w + ox;
          if constexpr (kMax) {
            dst[o] = best;
            argmax_[p * out_plane + o] = at;
          } else {
            dst[o] = sum * inv;
          }
        }
      }
    }
  }

  const bool max_;
  const int k_, s_;
  const ActShape in_, out_;
  std::vector<int32_t> argmax_;  // Per output: its window's maximum's index.
};

}  // namespace

std::unique_ptr<CpuLayer> MakeCpuLayer(const GraphLayer& layer,
                                       const LayerTensors& tensors,
                                       const Blas* blas) {
  switch (layer.config.kind) {
    case LayerKind::kDense:
      return std::make_unique<Dense>(layer, tensors, blas);
    case LayerKind::kBottomDense:
      return std::make_unique<BottomDense>(layer, tensors, blas);
    case LayerKind::kConv2d:
      return MakeCpuConv2d(layer, tensors, blas);
    case LayerKind::kMaxPool2d:
      return std::make_unique<Pool2d>(layer, /*max=*/true);
    case LayerKind::kAvgPool2d:
      return std::make_unique<Pool2d>(layer, /*max=*/false);
    case LayerKind::kRelu:
      return std::make_unique<Relu>(layer);
    case LayerKind::kDropout:
      return std::make_unique<Dropout>(layer);
    case LayerKind::kFlatten:
      return std::make_unique<Flatten>(layer);
    case LayerKind::kBatchNorm:
      return MakeCpuBatchNorm(layer, tensors);
    case LayerKind::kEmbeddingBag:
    case LayerKind::kEmbeddingConcat:
      break;  // Sparse fronts are not dense layers
              // (worker/model/embedding_front.h).
  }
  return nullptr;
}

}  // namespace paramd
