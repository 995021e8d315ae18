#include "worker/model/cpu_mlp.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

CpuMlp::CpuMlp(std::vector<int> layers, int max_batch, int threads,
               const Blas* blas)
    : layers_(std::move(layers)),
      max_batch_(max_batch),
      threads_(threads),
      blas_(blas) {
  blas_->SetThreads(threads_);
  for (size_t l = 0; l + 1 < layers_.size(); ++l) {
    weight_offset_.push_back(num_params_);
    num_params_ += int64_t{layers_[l]} * layers_[l + 1];
    bias_offset_.push_back(num_params_);
    num_params_ += layers_[l + 1];
    act_.emplace_back(static_cast<size_t>(max_batch_) * layers_[l + 1]);
    delta_.emplace_back(static_cast<size_t>(max_batch_) * layers_[l + 1]);
  }
}

std::string CpuMlp::Describe() const {
  return absl::StrCat("cpu, ", threads_, " thread", threads_ == 1 ? "" : "s",
                      ", ", blas_->description());
}

const float* CpuMlp::Weight(absl::Span<const float> params, int layer) const {
  return params.data() + weight_offset_[layer];
}

const float* CpuMlp::Bias(absl::Span<const float> params, int layer) const {
  return params.data() + bias_offset_[layer];
}

int CpuMlp::RowsPerPiece(const StepHooks* hooks, int layer) const {
  const int fan_in = layers_[layer], fan_out = layers_[layer + 1];
  if (hooks == nullptr || hooks->piece <= 0) return fan_in;
  return static_cast<int>(
      std::clamp<int64_t>(hooks->piece / fan_out, 1, fan_in));
}

absl::Status CpuMlp::Forward(absl::Span<const float> params, const float* x,
                             int n, const StepHooks* hooks) {
  const int num_layers = static_cast<int>(act_.size());
  const float* in = x;
  for (int l = 0; l < num_layers; ++l) {
    const int fan_in = layers_[l], fan_out = layers_[l + 1];
    float* out = act_[l].data();
    // out = in · W + b. Without hooks b is broadcast first and one SGEMM
    // adds onto it; with them one product per piece of W's rows (input
    // features) adds on as its rows arrive, and b (which travels after W)
    // last.
    const float* b = Bias(params, l);
    if (hooks == nullptr) {
      for (int i = 0; i < n; ++i) {
        std::copy(b, b + fan_out, out + static_cast<int64_t>(i) * fan_out);
      }
    } else {
      std::fill(out, out + int64_t{n} * fan_out, 0.0f);
    }
    const int rows = RowsPerPiece(hooks, l);
    for (int r = 0; r < fan_in; r += rows) {
      const int m = std::min(rows, fan_in - r);
      const int64_t w = weight_offset_[l] + int64_t{r} * fan_out;
      if (hooks != nullptr) {
        RETURN_IF_ERROR(hooks->await_params(w, w + int64_t{m} * fan_out));
      }
      blas_->Sgemm(false, false, n, fan_out, m, 1.0f, in + r, fan_in,
                   params.data() + w, fan_out, 1.0f, out, fan_out);
    }
    if (hooks != nullptr) {
      RETURN_IF_ERROR(
          hooks->await_params(bias_offset_[l], bias_offset_[l] + fan_out));
      for (int i = 0; i < n; ++i) {
        float* row = out + static_cast<int64_t>(i) * fan_out;
        for (int j = 0; j < fan_out; ++j) row[j] += b[j];
      }
    }
    if (l + 1 < num_layers) {
      const int64_t count = int64_t{n} * fan_out;
      for (int64_t i = 0; i < count; ++i) out[i] = std::max(out[i], 0.0f);
    }
    in = out;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CpuMlp::ComputeGradients(absl::Span<const float> params,
                                                const float* x,
                                                const int32_t* y, int n,
                                                absl::Span<float> grads) {
  return Compute(params, x, y, n, grads, nullptr);
}

absl::StatusOr<double> CpuMlp::ComputeOverlapped(absl::Span<const float> params,
                                                 const float* x,
                                                 const int32_t* y, int n,
                                                 absl::Span<float> grads,
                                                 const StepHooks& hooks) {
  return Compute(params, x, y, n, grads, &hooks);
}

absl::StatusOr<double> CpuMlp::Compute(absl::Span<const float> params,
                                       const float* x, const int32_t* y, int n,
                                       absl::Span<float> grads,
                                       const StepHooks* hooks) {
  if (n < 1 || n > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ComputeGradients: batch of ", n, " outside [1, ", max_batch_, "]"));
  }
  if (static_cast<int64_t>(params.size()) != num_params_ ||
      grads.size() != params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ComputeGradients: ", params.size(), " parameters and ",
                     grads.size(), " gradients; the model has ", num_params_));
  }
  RETURN_IF_ERROR(Forward(params, x, n, hooks));
  ASSIGN_OR_RETURN(const double loss, SoftmaxCrossEntropy(y, n));
  if (hooks != nullptr) RETURN_IF_ERROR(hooks->gradients_begin(loss / n));
  Backward(params, x, n, grads, hooks);
  return loss / n;
}

absl::StatusOr<double> CpuMlp::SoftmaxCrossEntropy(const int32_t* y, int n) {
  // delta = (softmax(logits) - onehot(y)) / n.
  const int classes = layers_.back();
  const float* logits = act_.back().data();
  float* d = delta_.back().data();
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

void CpuMlp::Backward(absl::Span<const float> params, const float* x, int n,
                      absl::Span<float> grads, const StepHooks* hooks) {
  const int num_layers = static_cast<int>(act_.size());
  for (int l = num_layers - 1; l >= 0; --l) {
    const int fan_in = layers_[l], fan_out = layers_[l + 1];
    const float* in = l == 0 ? x : act_[l - 1].data();
    const float* dl = delta_[l].data();
    // db = column sums of delta
    float* db = grads.data() + bias_offset_[l];
    std::fill(db, db + fan_out, 0.0f);
    for (int i = 0; i < n; ++i) {
      const float* row = dl + static_cast<int64_t>(i) * fan_out;
      for (int j = 0; j < fan_out; ++j) db[j] += row[j];
    }
    if (hooks != nullptr) {
      hooks->gradient_ready(bias_offset_[l], bias_offset_[l] + fan_out);
    }
    // dW = inᵀ · delta; with hooks by pieces of rows, each handed on as
    // soon as it is computed.
    const int rows = RowsPerPiece(hooks, l);
    for (int r = 0; r < fan_in; r += rows) {
      const int m = std::min(rows, fan_in - r);
      const int64_t w = weight_offset_[l] + int64_t{r} * fan_out;
      blas_->Sgemm(true, false, m, fan_out, n, 1.0f, in + r, fan_in, dl,
                   fan_out, 0.0f, grads.data() + w, fan_out);
      if (hooks != nullptr) hooks->gradient_ready(w, w + int64_t{m} * fan_out);
    }
    if (l == 0) {
      if (want_input_grad_) {
        // dx = delta_0 · W_0ᵀ (no activation before the first layer).
        blas_->Sgemm(false, true, n, fan_in, fan_out, 1.0f, dl, fan_out,
                     Weight(params, 0), fan_out, 0.0f, input_grad_.data(),
                     fan_in);
        last_n_ = n;
      }
      break;
    }
    // delta_{l-1} = (delta · Wᵀ) ⊙ relu'(act_{l-1})
    float* prev = delta_[l - 1].data();
    blas_->Sgemm(false, true, n, fan_in, fan_out, 1.0f, dl, fan_out,
                 Weight(params, l), fan_out, 0.0f, prev, fan_in);
    const float* a = act_[l - 1].data();
    const int64_t count = int64_t{n} * fan_in;
    for (int64_t i = 0; i < count; ++i) {
      if (a[i] <= 0.0f) prev[i] = 0.0f;
    }
  }
}

absl::Status CpuMlp::EnableInputGradient() {
  want_input_grad_ = true;
  input_grad_.resize(static_cast<size_t>(max_batch_) * layers_[0]);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CpuMlp::CountCorrect(absl::Span<const float> params,
                                             const float* x, const int32_t* y,
                                             int n) {
  if (static_cast<int64_t>(params.size()) != num_params_) {
    return absl::InvalidArgumentError(
        absl::StrCat("CountCorrect: ", params.size(),
                     " parameters; the model has ", num_params_));
  }
  const int classes = layers_.back();
  int64_t correct = 0;
  for (int begin = 0; begin < n; begin += max_batch_) {
    const int m = std::min(max_batch_, n - begin);
    RETURN_IF_ERROR(
        Forward(params, x + static_cast<int64_t>(begin) * layers_[0], m));
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

}  // namespace paramd
