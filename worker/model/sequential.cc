#include "worker/model/sequential.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

// Evaluation batches keep activations and scratch under this many floats.
constexpr int64_t kEvalFloats = int64_t{4} << 20;

// Floats one sample takes in activations, gradients and im2col columns.
int64_t ScratchPerSample(const LayerGraph& g) {
  int64_t floats = g.input.size();
  for (const GraphLayer& l : g.layers) {
    floats += 2 * l.out.size();
    if (l.config.kind == LayerKind::kConv2d) {
      floats += int64_t{l.in.c} * l.config.kernel * l.config.kernel * l.out.h *
                l.out.w;
    }
    if (l.config.kind == LayerKind::kBatchNorm) floats += l.out.size();
  }
  return floats;
}

}  // namespace

CpuSequential::CpuSequential(LayerGraph graph, int max_batch, int threads,
                             const Blas* blas)
    : graph_(std::move(graph)),
      max_batch_(max_batch),
      threads_(threads),
      blas_(blas) {
  blas_->SetThreads(threads_);
  const ModelSpec spec = GraphModelSpec(graph_);
  const FlatLayout layout(spec);
  num_params_ = layout.total;
  const std::vector<LayerTensors> tensors =
      LayerTensors::Of(graph_, spec, layout);
  for (size_t l = 0; l < graph_.layers.size(); ++l) {
    layers_.push_back(MakeCpuLayer(graph_.layers[l], tensors[l], blas_));
  }
  act_.resize(layers_.size());
  delta_.resize(layers_.size());
  eval_batch_ = static_cast<int>(std::clamp<int64_t>(
      kEvalFloats / ScratchPerSample(graph_), 1, std::max(max_batch_, 1)));
}

absl::StatusOr<std::unique_ptr<CpuSequential>> CpuSequential::Mlp(
    const std::vector<int>& widths, int max_batch, int threads,
    const Blas* blas) {
  ModelConfig config;
  config.layers = widths;
  ASSIGN_OR_RETURN(LayerGraph graph, InferLayerGraph(config));
  return std::make_unique<CpuSequential>(std::move(graph), max_batch, threads,
                                         blas);
}

std::string CpuSequential::Describe() const {
  return absl::StrCat("cpu, ", threads_, " thread", threads_ == 1 ? "" : "s",
                      ", ", blas_->description());
}

absl::Status CpuSequential::CheckParams(const char* call, size_t params) const {
  if (static_cast<int64_t>(params) == num_params_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      call, ": ", params, " parameters; the model has ", num_params_));
}

absl::Status CpuSequential::Forward(const LayerPass& pass, const float* x) {
  const float* in = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    std::vector<float>& out = act_[l];
    const size_t need =
        static_cast<size_t>(pass.n) * graph_.layers[l].out.size();
    if (out.size() < need) out.resize(need);
    RETURN_IF_ERROR(layers_[l]->Forward(pass, in, out.data()));
    in = out.data();
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CpuSequential::ComputeGradients(
    absl::Span<const float> params, const float* x, const int32_t* y, int n,
    absl::Span<float> grads) {
  return Compute(params, x, y, n, grads, nullptr);
}

absl::StatusOr<double> CpuSequential::ComputeOverlapped(
    absl::Span<const float> params, const float* x, const int32_t* y, int n,
    absl::Span<float> grads, const StepHooks& hooks) {
  return Compute(params, x, y, n, grads, &hooks);
}

absl::StatusOr<double> CpuSequential::Compute(absl::Span<const float> params,
                                              const float* x, const int32_t* y,
                                              int n, absl::Span<float> grads,
                                              const StepHooks* hooks) {
  RETURN_IF_ERROR(CheckStepArguments(n, max_batch_, params.size(), grads.size(),
                                     num_params_));
  LayerPass pass{params, grads, hooks, /*training=*/true, seed_, n};
  RETURN_IF_ERROR(Forward(pass, x));
  ASSIGN_OR_RETURN(const double loss, SoftmaxCrossEntropy(y, n));
  forward_end_ = time_forward_ ? absl::Now() : absl::InfinitePast();
  if (hooks != nullptr) RETURN_IF_ERROR(hooks->gradients_begin(loss / n));
  for (size_t l = layers_.size(); l-- > 0;) {
    float* din = nullptr;
    if (l > 0) {
      std::vector<float>& d = delta_[l - 1];
      const size_t need =
          static_cast<size_t>(n) * graph_.layers[l - 1].out.size();
      if (d.size() < need) d.resize(need);
      din = d.data();
    } else if (want_input_grad_) {
      din = input_grad_.data();
      last_n_ = n;
    }
    layers_[l]->Backward(pass, l == 0 ? x : act_[l - 1].data(), act_[l].data(),
                         delta_[l].data(), din);
  }
  return loss / n;
}

absl::StatusOr<double> CpuSequential::SoftmaxCrossEntropy(const int32_t* y,
                                                          int n) {
  // delta = (softmax(logits) - onehot(y)) / n.
  const int classes = graph_.classes();
  const float* logits = act_.back().data();
  std::vector<float>& delta = delta_.back();
  if (delta.size() < static_cast<size_t>(n) * classes) {
    delta.resize(static_cast<size_t>(n) * classes);
  }
  float* d = delta.data();
  double loss = 0;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<int64_t>(i) * classes;
    float* di = d + static_cast<int64_t>(i) * classes;
    if (y[i] < 0 || y[i] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ComputeGradients: label ", y[i], " outside [0, ", classes, ")"));
    }
    const float zmax = *std::max_element(z, z + classes);
    float sum = 0;
    for (int c = 0; c < classes; ++c) sum += (di[c] = std::exp(z[c] - zmax));
    loss += std::log(sum) - (z[y[i]] - zmax);
    const float inv_sum = 1.0f / sum;
    for (int c = 0; c < classes; ++c) di[c] *= inv_sum * inv_n;
    di[y[i]] -= inv_n;
  }
  return loss;
}

absl::Status CpuSequential::EnableInputGradient() {
  want_input_grad_ = true;
  input_grad_.resize(static_cast<size_t>(max_batch_) * graph_.input.size());
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CpuSequential::CountCorrect(
    absl::Span<const float> params, const float* x, const int32_t* y, int n) {
  RETURN_IF_ERROR(CheckParams("CountCorrect", params.size()));
  const int classes = graph_.classes();
  const int64_t inputs = graph_.input.size();
  int64_t correct = 0;
  for (int begin = 0; begin < n; begin += eval_batch_) {
    const int m = std::min(eval_batch_, n - begin);
    LayerPass pass{params, {}, nullptr, /*training=*/false, seed_, m};
    RETURN_IF_ERROR(Forward(pass, x + begin * inputs));
    const float* logits = act_.back().data();
    for (int i = 0; i < m; ++i) {
      const float* z = logits + static_cast<int64_t>(i) * classes;
      const int predicted =
          static_cast<int>(std::max_element(z, z + classes) - z);
      correct += predicted == y[begin + i];
    }
  }
  return correct;
}

absl::Status CpuSequential::Logits(absl::Span<const float> params,
                                   const float* x, int n,
                                   absl::Span<float> out) {
  RETURN_IF_ERROR(CheckParams("Logits", params.size()));
  const int classes = graph_.classes();
  RETURN_IF_ERROR(CheckLogitsRoom(n, classes, out.size()));
  const int64_t inputs = graph_.input.size();
  for (int begin = 0; begin < n; begin += eval_batch_) {
    const int m = std::min(eval_batch_, n - begin);
    LayerPass pass{params, {}, nullptr, /*training=*/false, seed_, m};
    RETURN_IF_ERROR(Forward(pass, x + begin * inputs));
    std::copy_n(act_.back().data(), static_cast<size_t>(m) * classes,
                out.data() + static_cast<size_t>(begin) * classes);
  }
  return absl::OkStatus();
}

}  // namespace paramd
