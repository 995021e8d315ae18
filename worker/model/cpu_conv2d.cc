#include "worker/model/cpu_conv2d.h"

#include <algorithm>
#include <vector>

#include "common/base/status_macros.h"

namespace paramd {
namespace {

class Conv2d : public CpuLayer {
 public:
  Conv2d(const GraphLayer& l, const LayerTensors& tensors, const Blas* blas)
      : in_(l.in),
        out_(l.out),
        k_(l.config.kernel),
        stride_(l.config.stride),
        pad_(l.config.padding),
        rows_(int64_t{l.in.c} * k_ * k_),
        plane_(int64_t{l.out.h} * l.out.w),
        weight_(tensors.offset("weight")),
        bias_(tensors.offset("bias")),
        blas_(blas) {}

  absl::Status Forward(const LayerPass& pass, const float* in,
                       float* out) override {
    const int64_t cols = pass.n * plane_;
    col_.resize(rows_ * cols);
    for (int s = 0; s < pass.n; ++s) {
      Im2Col(in + s * in_.size(), col_.data() + s * plane_, cols);
    }
    if (pass.hooks != nullptr) {
      RETURN_IF_ERROR(pass.hooks->await_params(weight_, bias_ + out_.c));
    }
    // Per sample: out_s [out_c × P] = b + W [out_c × rows] · col_s [rows ×
    // P], col_s being the sample's P columns of the batch's matrix.
    const float* w = pass.params.data() + weight_;
    const float* b = pass.params.data() + bias_;
    for (int s = 0; s < pass.n; ++s) {
      float* dst = out + int64_t{s} * out_.c * plane_;
      for (int o = 0; o < out_.c; ++o) {
        std::fill(dst + o * plane_, dst + (o + 1) * plane_, b[o]);
      }
      blas_->Sgemm(false, false, out_.c, P(), R(), 1.0f, w, R(),
                   col_.data() + s * plane_, static_cast<int>(cols), 1.0f, dst,
                   P());
    }
    return absl::OkStatus();
  }

  void Backward(const LayerPass& pass, const float*, const float*,
                const float* dout, float* din) override {
    const int64_t cols = pass.n * plane_;
    const float* w = pass.params.data() + weight_;
    float* dw = pass.grads.data() + weight_;
    float* db = pass.grads.data() + bias_;
    std::fill(db, db + out_.c, 0.0f);
    for (int s = 0; s < pass.n; ++s) {
      const float* g = dout + int64_t{s} * out_.c * plane_;
      for (int o = 0; o < out_.c; ++o) {
        float sum = 0;
        for (int64_t p = 0; p < plane_; ++p) sum += g[o * plane_ + p];
        db[o] += sum;
      }
      // dW [out_c × rows] += dout_s [out_c × P] · col_sᵀ.
      blas_->Sgemm(false, true, out_.c, R(), P(), 1.0f, g, P(),
                   col_.data() + s * plane_, static_cast<int>(cols),
                   s == 0 ? 0.0f : 1.0f, dw, R());
    }
    if (pass.hooks != nullptr) {
      pass.hooks->gradient_ready(weight_, bias_ + out_.c);
    }
    if (din == nullptr) return;
    // Per sample: dcol_s [rows × P] = Wᵀ · dout_s, scattered back onto the
    // sample's input.
    std::fill(din, din + pass.n * in_.size(), 0.0f);
    dcol_.resize(rows_ * plane_);
    for (int s = 0; s < pass.n; ++s) {
      blas_->Sgemm(true, false, R(), P(), out_.c, 1.0f, w, R(),
                   dout + int64_t{s} * out_.c * plane_, P(), 0.0f, dcol_.data(),
                   P());
      Col2Im(dcol_.data(), plane_, din + s * in_.size());
    }
  }

 private:
  int R() const { return static_cast<int>(rows_); }
  int P() const { return static_cast<int>(plane_); }

  // Output columns ox whose input column ox·stride - pad + kx lies inside
  // the image: [*lo, *hi).
  void ValidColumns(int kx, int* lo, int* hi) const {
    // ix = ox·stride - pad + kx ≥ 0  ⇔  ox ≥ ceil((pad - kx) / stride).
    const int first = pad_ - kx;
    *lo = first <= 0 ? 0 : (first + stride_ - 1) / stride_;
    // ix < in.w  ⇔  ox ≤ (in.w - 1 + pad - kx) / stride.
    const int last = in_.w - 1 + pad_ - kx;
    *hi = last < 0 ? 0 : std::min(out_.w, last / stride_ + 1);
    *lo = std::min(*lo, *hi);
  }

  // The receptive fields of one image as rows × P columns at `col`, whose
  // rows are `ld` floats apart.
  void Im2Col(const float* image, float* col, int64_t ld) const {
    for (int c = 0; c < in_.c; ++c) {
      for (int ky = 0; ky < k_; ++ky) {
        for (int kx = 0; kx < k_; ++kx) {
          float* row = col + ((int64_t{c} * k_ + ky) * k_ + kx) * ld;
          int lo, hi;
          ValidColumns(kx, &lo, &hi);
          for (int oy = 0; oy < out_.h; ++oy) {
            float* dst = row + int64_t{oy} * out_.w;
            const int iy = oy * stride_ - pad_ + ky;
            if (iy < 0 || iy >= in_.h) {
              std::fill(dst, dst + out_.w, 0.0f);
              continue;
            }
            const float* src =
                image + (int64_t{c} * in_.h + iy) * in_.w - pad_ + kx;
            std::fill(dst, dst + lo, 0.0f);
            if (stride_ == 1) {
              std::copy(src + lo, src + hi, dst + lo);
            } else {
              for (int ox = lo; ox < hi; ++ox) dst[ox] = src[ox * stride_];
            }
            std::fill(dst + hi, dst + out_.w, 0.0f);
          }
        }
      }
    }
  }

  // Adds columns laid out as Im2Col writes them back onto `image`.
  void Col2Im(const float* col, int64_t ld, float* image) const {
    for (int c = 0; c < in_.c; ++c) {
      for (int ky = 0; ky < k_; ++ky) {
        for (int kx = 0; kx < k_; ++kx) {
          const float* row = col + ((int64_t{c} * k_ + ky) * k_ + kx) * ld;
          int lo, hi;
          ValidColumns(kx, &lo, &hi);
          for (int oy = 0; oy < out_.h; ++oy) {
            const int iy = oy * stride_ - pad_ + ky;
            if (iy < 0 || iy >= in_.h) continue;
            const float* __restrict src = row + int64_t{oy} * out_.w;
            float* __restrict dst =
                image + (int64_t{c} * in_.h + iy) * in_.w - pad_ + kx;
            if (stride_ == 1) {
              for (int ox = lo; ox < hi; ++ox) dst[ox] += src[ox];
            } else {
              for (int ox = lo; ox < hi; ++ox) dst[ox * stride_] += src[ox];
            }
          }
        }
      }
    }
  }

  const ActShape in_, out_;
  const int k_, stride_, pad_;
  const int64_t rows_;   // C·k·k: one receptive field.
  const int64_t plane_;  // Ho·Wo: one output channel of one sample.
  const int64_t weight_, bias_;
  const Blas* const blas_;
  std::vector<float> col_;   // [rows × n·P]; kept from Forward for Backward.
  std::vector<float> dcol_;  // [rows × P]: one sample's input gradient.
};

}  // namespace

std::unique_ptr<CpuLayer> MakeCpuConv2d(const GraphLayer& layer,
                                        const LayerTensors& tensors,
                                        const Blas* blas) {
  return std::make_unique<Conv2d>(layer, tensors, blas);
}

}  // namespace paramd
