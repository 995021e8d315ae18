#include "worker/model/device_layers.h"

#include <algorithm>
#include <utility>

#include "common/base/status_macros.h"

namespace paramd {
namespace {

using kernels::Windows;

Windows WindowsOf(const GraphLayer& l, int n) {
  Windows g;
  g.c = l.in.c;
  g.h = l.in.h;
  g.w = l.in.w;
  g.ho = l.out.h;
  g.wo = l.out.w;
  g.k = l.config.kernel;
  g.stride = l.config.stride;
  g.pad = l.config.kind == LayerKind::kConv2d ? l.config.padding : 0;
  g.n = n;
  return g;
}

// out = in · W + b, W [in × out] row-major: b broadcast, then one GEMM
// adds onto it (as the CPU's dense layer).
class Dense : public DeviceLayer {
 public:
  Dense(const GraphLayer& l, const LayerTensors& tensors, DeviceOps* ops)
      : fan_in_(static_cast<int>(l.in.size())),
        fan_out_(l.out.c),
        weight_(tensors.offset("weight")),
        bias_(tensors.offset("bias")),
        ops_(ops) {
    begin_ = weight_;
    end_ = bias_ + fan_out_;
  }

  absl::Status Forward(const DevicePass& pass, const float* in,
                       float* out) override {
    RETURN_IF_ERROR(
        ops_->Launch(kernels::BroadcastRows{pass.params + bias_, out, fan_out_},
                     int64_t{pass.n} * fan_out_));
    return ops_->Gemm(false, false, pass.n, fan_out_, fan_in_, in, fan_in_,
                      pass.params + weight_, fan_out_, 1.0f, out, fan_out_);
  }

  absl::Status Backward(const DevicePass& pass, const float* in, const float*,
                        const float* dout, float* din) override {
    RETURN_IF_ERROR(ops_->Launch(
        kernels::ColumnSums{dout, pass.n, fan_out_, pass.grads + bias_},
        fan_out_));
    // dW = inᵀ · dout.
    RETURN_IF_ERROR(ops_->Gemm(true, false, fan_in_, fan_out_, pass.n, in,
                               fan_in_, dout, fan_out_, 0.0f,
                               pass.grads + weight_, fan_out_));
    if (din == nullptr) return absl::OkStatus();
    // din = dout · Wᵀ.
    return ops_->Gemm(false, true, pass.n, fan_in_, fan_out_, dout, fan_out_,
                      pass.params + weight_, fan_out_, 0.0f, din, fan_in_);
  }

 private:
  const int fan_in_, fan_out_;
  const int64_t weight_, bias_;
  DeviceOps* const ops_;
};

// The batch's receptive fields as one matrix col [rows × n·P]; then
// forward: out_cm [C_out × n·P] = W [C_out × rows] · col, back to images
// with the bias; backward: dW = dout_cm · colᵀ, dcol = Wᵀ · dout_cm,
// scattered back onto the input (Col2Im, a gather: no atomics).
class Conv2d : public DeviceLayer {
 public:
  Conv2d(const GraphLayer& l, const LayerTensors& tensors, DeviceOps* ops)
      : layer_(l),
        out_c_(l.out.c),
        rows_(WindowsOf(l, 0).rows()),
        plane_(WindowsOf(l, 0).plane()),
        weight_(tensors.offset("weight")),
        bias_(tensors.offset("bias")),
        ops_(ops) {
    begin_ = weight_;
    end_ = bias_ + out_c_;
  }

  absl::Status Init(int max_batch) {
    const size_t cols = static_cast<size_t>(max_batch) * plane_;
    ASSIGN_OR_RETURN(col_, DeviceArray<float>::Make(ops_, rows_ * cols));
    ASSIGN_OR_RETURN(dcol_, DeviceArray<float>::Make(ops_, rows_ * cols));
    ASSIGN_OR_RETURN(cm_, DeviceArray<float>::Make(ops_, out_c_ * cols));
    ASSIGN_OR_RETURN(
        plane_sums_,
        DeviceArray<float>::Make(ops_, static_cast<size_t>(out_c_) *
                                           static_cast<size_t>(max_batch)));
    return absl::OkStatus();
  }

  absl::Status Forward(const DevicePass& pass, const float* in,
                       float* out) override {
    const Windows g = WindowsOf(layer_, pass.n);
    const int cols = static_cast<int>(pass.n * plane_);
    RETURN_IF_ERROR(
        ops_->Launch(kernels::Im2Col{in, col_.get(), g}, rows_ * cols));
    RETURN_IF_ERROR(ops_->Gemm(false, false, out_c_, cols, R(),
                               pass.params + weight_, R(), col_.get(), cols,
                               0.0f, cm_.get(), cols));
    return ops_->Launch(
        kernels::FromChannelMajor{cm_.get(), pass.params + bias_, out, pass.n,
                                  out_c_, plane_},
        int64_t{out_c_} * cols);
  }

  absl::Status Backward(const DevicePass& pass, const float*, const float*,
                        const float* dout, float* din) override {
    const Windows g = WindowsOf(layer_, pass.n);
    const int cols = static_cast<int>(pass.n * plane_);
    RETURN_IF_ERROR(ops_->Launch(
        kernels::ToChannelMajor{dout, cm_.get(), pass.n, out_c_, plane_},
        int64_t{out_c_} * cols));
    // The bias gradient: each sample's plane, then the samples' sums.
    RETURN_IF_ERROR(ops_->Launch(
        kernels::GroupSums{cm_.get(), cols, plane_, plane_sums_.get()},
        int64_t{out_c_} * pass.n));
    RETURN_IF_ERROR(ops_->Launch(
        kernels::RowSums{plane_sums_.get(), pass.n, pass.grads + bias_},
        out_c_));
    RETURN_IF_ERROR(ops_->Gemm(false, true, out_c_, R(), cols, cm_.get(), cols,
                               col_.get(), cols, 0.0f, pass.grads + weight_,
                               R()));
    if (din == nullptr) return absl::OkStatus();
    RETURN_IF_ERROR(ops_->Gemm(true, false, R(), cols, out_c_,
                               pass.params + weight_, R(), cm_.get(), cols,
                               0.0f, dcol_.get(), cols));
    return ops_->Launch(kernels::Col2Im{dcol_.get(), din, g},
                        int64_t{pass.n} * layer_.in.size());
  }

 private:
  int R() const { return static_cast<int>(rows_); }

  const GraphLayer layer_;
  const int out_c_;
  const int64_t rows_;   // C·k·k: one receptive field.
  const int64_t plane_;  // Ho·Wo.
  const int64_t weight_, bias_;
  DeviceOps* const ops_;
  DeviceArray<float> col_;   // Kept from Forward for Backward.
  DeviceArray<float> dcol_;  // d(col).
  DeviceArray<float> cm_;    // The output (then its gradient), channel-major.
  DeviceArray<float> plane_sums_;  // [C_out × n]: the bias gradient's parts.
};

class Pool2d : public DeviceLayer {
 public:
  Pool2d(const GraphLayer& l, DeviceOps* ops)
      : layer_(l), max_(l.config.kind == LayerKind::kMaxPool2d), ops_(ops) {}

  absl::Status Init(int max_batch) {
    if (!max_) return absl::OkStatus();
    ASSIGN_OR_RETURN(argmax_, DeviceArray<int32_t>::Make(
                                  ops_, max_batch * layer_.out.size()));
    return absl::OkStatus();
  }

  absl::Status Forward(const DevicePass& pass, const float* in,
                       float* out) override {
    return ops_->Launch(kernels::PoolForward{in, out, argmax_.get(),
                                             WindowsOf(layer_, pass.n), max_},
                        pass.n * layer_.out.size());
  }

  absl::Status Backward(const DevicePass& pass, const float*, const float*,
                        const float* dout, float* din) override {
    if (din == nullptr) return absl::OkStatus();
    return ops_->Launch(kernels::PoolBackward{dout, argmax_.get(), din,
                                              WindowsOf(layer_, pass.n), max_},
                        pass.n * layer_.in.size());
  }

 private:
  const GraphLayer layer_;
  const bool max_;
  DeviceOps* const ops_;
  DeviceArray<int32_t> argmax_;  // Per output: where its window's max is.
};

// relu, dropout and flatten: element by element over n × size.
class Elementwise : public DeviceLayer {
 public:
  Elementwise(const GraphLayer& l, DeviceOps* ops)
      : kind_(l.config.kind), size_(l.in.size()), p_(l.config.p), ops_(ops) {}

  absl::Status Forward(const DevicePass& pass, const float* in,
                       float* out) override {
    const int64_t count = pass.n * size_;
    if (kind_ == LayerKind::kRelu) {
      return ops_->Launch(kernels::Relu{in, out}, count);
    }
    return MaybeDrop(pass, in, out);
  }

  absl::Status Backward(const DevicePass& pass, const float*, const float* out,
                        const float* dout, float* din) override {
    if (din == nullptr) return absl::OkStatus();
    if (kind_ == LayerKind::kRelu) {
      return ops_->Launch(kernels::ReluBackward{out, dout, din},
                          pass.n * size_);
    }
    return MaybeDrop(pass, dout, din);
  }

 private:
  // dropout while training: dst = src ⊙ mask / (1-p); else (and flatten)
  // a copy.
  absl::Status MaybeDrop(const DevicePass& pass, const float* src, float* dst) {
    const int64_t count = pass.n * size_;
    if (kind_ == LayerKind::kDropout && pass.training && p_ != 0) {
      return ops_->Launch(
          kernels::Dropout{src, dst, pass.seed, size_, p_,
                           static_cast<float>(1.0 / (1.0 - p_))},
          count);
    }
    return ops_->Launch(kernels::Copy{src, dst}, count);
  }

  const LayerKind kind_;
  const int64_t size_;
  const double p_;
  DeviceOps* const ops_;
};

// Per channel over the batch (an image's planes, or a flat vector's
// features): batch statistics while training, the running ones when
// evaluating; the running statistics' change is pushed as their
// "gradient", as on the CPU (worker/model/cpu_batch_norm.h).
class BatchNorm : public DeviceLayer {
 public:
  BatchNorm(const GraphLayer& l, const LayerTensors& tensors, DeviceOps* ops)
      : c_(l.in.c),
        plane_(int64_t{l.in.h} * l.in.w),
        size_(l.in.size()),
        momentum_(static_cast<float>(l.config.momentum)),
        eps_(l.config.eps),
        gamma_(tensors.offset("weight")),
        beta_(tensors.offset("bias")),
        mean_(tensors.offset("running_mean")),
        var_(tensors.offset("running_var")),
        ops_(ops) {
    begin_ = std::min({gamma_, beta_, mean_, var_});
    end_ = std::max({gamma_, beta_, mean_, var_}) + c_;
  }

  absl::Status Init(int max_batch) {
    ASSIGN_OR_RETURN(xhat_, DeviceArray<float>::Make(ops_, max_batch * size_));
    ASSIGN_OR_RETURN(partial_a_,
                     DeviceArray<double>::Make(ops_, c_ * kMaxSlices));
    ASSIGN_OR_RETURN(partial_b_,
                     DeviceArray<double>::Make(ops_, c_ * kMaxSlices));
    ASSIGN_OR_RETURN(mean_d_, DeviceArray<double>::Make(ops_, c_));
    // fmean, inv_std, mean_dy, mean_dyx: C each; stat_delta: 2C.
    ASSIGN_OR_RETURN(per_channel_, DeviceArray<float>::Make(ops_, 6 * c_));
    return absl::OkStatus();
  }

  absl::Status Forward(const DevicePass& pass, const float* in,
                       float* out) override {
    const float* p = pass.params;
    const int64_t m = pass.n * plane_;
    if (pass.training) {
      const int slices = Slices(m);
      RETURN_IF_ERROR(ops_->Launch(
          kernels::BatchNormPartial{in, nullptr, nullptr, partial_a_.get(),
                                    kernels::BatchNormSum::kValue, c_, pass.n,
                                    slices, plane_},
          int64_t{c_} * slices));
      RETURN_IF_ERROR(ops_->Launch(
          kernels::BatchNormMean{partial_a_.get(), mean_d_.get(), slices, m},
          c_));
      RETURN_IF_ERROR(ops_->Launch(
          kernels::BatchNormPartial{
              in, nullptr, mean_d_.get(), partial_a_.get(),
              kernels::BatchNormSum::kDeviation, c_, pass.n, slices, plane_},
          int64_t{c_} * slices));
      RETURN_IF_ERROR(ops_->Launch(
          kernels::BatchNormTrainStats{
              partial_a_.get(), mean_d_.get(), p + mean_, p + var_, fmean(),
              inv_std(), stat_delta(), c_, slices, m, momentum_, eps_},
          c_));
    } else {
      RETURN_IF_ERROR(
          ops_->Launch(kernels::BatchNormEvalStats{p + mean_, p + var_, fmean(),
                                                   inv_std(), eps_},
                       c_));
    }
    return ops_->Launch(
        kernels::BatchNormNormalize{
            in, out, pass.training ? xhat_.get() : nullptr, fmean(), inv_std(),
            p + gamma_, p + beta_, c_, plane_},
        pass.n * size_);
  }

  absl::Status Backward(const DevicePass& pass, const float*, const float*,
                        const float* dout, float* din) override {
    const int64_t m = pass.n * plane_;
    const int slices = Slices(m);
    RETURN_IF_ERROR(ops_->Launch(
        kernels::BatchNormPartial{dout, nullptr, nullptr, partial_a_.get(),
                                  kernels::BatchNormSum::kValue, c_, pass.n,
                                  slices, plane_},
        int64_t{c_} * slices));
    RETURN_IF_ERROR(ops_->Launch(
        kernels::BatchNormPartial{dout, xhat_.get(), nullptr, partial_b_.get(),
                                  kernels::BatchNormSum::kProduct, c_, pass.n,
                                  slices, plane_},
        int64_t{c_} * slices));
    float* g = pass.grads;
    RETURN_IF_ERROR(ops_->Launch(
        kernels::BatchNormGrads{partial_a_.get(), partial_b_.get(),
                                stat_delta(), g + gamma_, g + beta_, g + mean_,
                                g + var_, mean_dy(), mean_dyx(), c_, slices, m},
        c_));
    if (din == nullptr) return absl::OkStatus();
    return ops_->Launch(
        kernels::BatchNormInputGrad{dout, xhat_.get(), din,
                                    pass.params + gamma_, inv_std(), mean_dy(),
                                    mean_dyx(), c_, plane_},
        pass.n * size_);
  }

 private:
  // Slices per channel: about 1,024 values each, at most kMaxSlices.
  static constexpr int kMaxSlices = 128;
  static int Slices(int64_t m) {
    return static_cast<int>(
        std::clamp<int64_t>((m + 1023) / 1024, 1, kMaxSlices));
  }
  float* fmean() const { return per_channel_.get(); }
  float* inv_std() const { return per_channel_.get() + c_; }
  float* mean_dy() const { return per_channel_.get() + 2 * c_; }
  float* mean_dyx() const { return per_channel_.get() + 3 * c_; }
  float* stat_delta() const { return per_channel_.get() + 4 * c_; }

  const int c_;
  const int64_t plane_, size_;
  const float momentum_;
  const double eps_;
  const int64_t gamma_, beta_, mean_, var_;
  DeviceOps* const ops_;
  DeviceArray<float> xhat_;  // The training batch's normalised input.
  DeviceArray<double> partial_a_, partial_b_, mean_d_;
  DeviceArray<float> per_channel_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceLayer>> MakeDeviceLayer(
    const GraphLayer& layer, const LayerTensors& tensors, DeviceOps* ops,
    int max_batch) {
  switch (layer.config.kind) {
    case LayerKind::kDense:
      return std::unique_ptr<DeviceLayer>(
          std::make_unique<Dense>(layer, tensors, ops));
    case LayerKind::kConv2d: {
      auto conv = std::make_unique<Conv2d>(layer, tensors, ops);
      RETURN_IF_ERROR(conv->Init(max_batch));
      return std::unique_ptr<DeviceLayer>(std::move(conv));
    }
    case LayerKind::kMaxPool2d:
    case LayerKind::kAvgPool2d: {
      auto pool = std::make_unique<Pool2d>(layer, ops);
      RETURN_IF_ERROR(pool->Init(max_batch));
      return std::unique_ptr<DeviceLayer>(std::move(pool));
    }
    case LayerKind::kRelu:
    case LayerKind::kDropout:
    case LayerKind::kFlatten:
      return std::unique_ptr<DeviceLayer>(
          std::make_unique<Elementwise>(layer, ops));
    case LayerKind::kBatchNorm: {
      auto bn = std::make_unique<BatchNorm>(layer, tensors, ops);
      RETURN_IF_ERROR(bn->Init(max_batch));
      return std::unique_ptr<DeviceLayer>(std::move(bn));
    }
    case LayerKind::kBottomDense:
      return absl::UnimplementedError(
          "bottom_dense runs on the CPU backend only (worker.device: cpu)");
    case LayerKind::kEmbeddingBag:
    case LayerKind::kEmbeddingConcat:
      break;  // Sparse fronts are not dense layers
              // (worker/model/embedding_front.h).
  }
  return absl::InvalidArgumentError("MakeDeviceLayer: an unknown layer kind");
}

}  // namespace paramd
