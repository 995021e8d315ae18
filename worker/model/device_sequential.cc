#include "worker/model/device_sequential.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/model/model_spec.h"

namespace paramd {

DeviceSequential::DeviceSequential(LayerGraph graph, int max_batch,
                                   std::unique_ptr<DeviceOps> ops)
    : ops_(std::move(ops)), graph_(std::move(graph)), max_batch_(max_batch) {}

absl::StatusOr<std::unique_ptr<DeviceSequential>> DeviceSequential::Create(
    LayerGraph graph, int max_batch, std::unique_ptr<DeviceOps> ops) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceSequential: max_batch ", max_batch, " < 1"));
  }
  std::unique_ptr<DeviceSequential> model(
      new DeviceSequential(std::move(graph), max_batch, std::move(ops)));
  RETURN_IF_ERROR(model->Init());
  return model;
}

absl::Status DeviceSequential::Init() {
  const ModelSpec spec = GraphModelSpec(graph_);
  const FlatLayout layout(spec);
  num_params_ = layout.total;
  const std::vector<LayerTensors> tensors =
      LayerTensors::Of(graph_, spec, layout);
  DeviceOps* ops = ops_.get();
  const size_t batch = static_cast<size_t>(max_batch_);
  for (size_t l = 0; l < graph_.layers.size(); ++l) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<DeviceLayer> layer,
        MakeDeviceLayer(graph_.layers[l], tensors[l], ops, max_batch_));
    layers_.push_back(std::move(layer));
    const size_t out = batch * graph_.layers[l].out.size();
    ASSIGN_OR_RETURN(DeviceArray<float> act,
                     DeviceArray<float>::Make(ops, out));
    ASSIGN_OR_RETURN(DeviceArray<float> delta,
                     DeviceArray<float>::Make(ops, out));
    act_.push_back(std::move(act));
    delta_.push_back(std::move(delta));
  }
  const size_t total = static_cast<size_t>(num_params_);
  const size_t inputs = batch * graph_.input.size();
  ASSIGN_OR_RETURN(params_, DeviceArray<float>::Make(ops, total));
  ASSIGN_OR_RETURN(grads_, DeviceArray<float>::Make(ops, total));
  ASSIGN_OR_RETURN(x_, DeviceArray<float>::Make(ops, inputs));
  ASSIGN_OR_RETURN(y_, DeviceArray<int32_t>::Make(ops, batch));
  ASSIGN_OR_RETURN(per_sample_, DeviceArray<double>::Make(ops, batch));
  ASSIGN_OR_RETURN(sum_, DeviceArray<double>::Make(ops, 1));
  ASSIGN_OR_RETURN(h_params_, DeviceArray<float>::Make(ops, total, true));
  ASSIGN_OR_RETURN(h_grads_, DeviceArray<float>::Make(ops, total, true));
  ASSIGN_OR_RETURN(h_x_, DeviceArray<float>::Make(ops, inputs, true));
  ASSIGN_OR_RETURN(h_y_, DeviceArray<int32_t>::Make(ops, batch, true));
  ASSIGN_OR_RETURN(h_sum_, DeviceArray<double>::Make(ops, 1, true));
  return absl::OkStatus();
}

absl::Status DeviceSequential::EnableInputGradient() {
  if (want_input_grad_) return absl::OkStatus();
  const size_t inputs = static_cast<size_t>(max_batch_) * graph_.input.size();
  ASSIGN_OR_RETURN(dx_, DeviceArray<float>::Make(ops_.get(), inputs));
  ASSIGN_OR_RETURN(h_dx_, DeviceArray<float>::Make(ops_.get(), inputs, true));
  want_input_grad_ = true;
  return absl::OkStatus();
}

absl::Span<const float> DeviceSequential::InputGradient() const {
  if (!want_input_grad_) return {};
  return absl::MakeConstSpan(
      h_dx_.get(), static_cast<size_t>(last_n_) * graph_.input.size());
}

absl::Status DeviceSequential::UploadBatch(const float* x, const int32_t* y,
                                           int n) {
  const size_t bytes =
      static_cast<size_t>(n) * graph_.input.size() * sizeof(float);
  std::memcpy(h_x_.get(), x, bytes);
  RETURN_IF_ERROR(ops_->CopyToDevice(x_.get(), h_x_.get(), bytes));
  if (y == nullptr) return absl::OkStatus();
  std::memcpy(h_y_.get(), y, static_cast<size_t>(n) * sizeof(int32_t));
  return ops_->CopyToDevice(y_.get(), h_y_.get(),
                            static_cast<size_t>(n) * sizeof(int32_t));
}

absl::Status DeviceSequential::UploadParams(absl::Span<const float> params,
                                            int64_t begin, int64_t end) {
  const size_t bytes = static_cast<size_t>(end - begin) * sizeof(float);
  std::memcpy(h_params_.get() + begin, params.data() + begin, bytes);
  return ops_->CopyToDevice(params_.get() + begin, h_params_.get() + begin,
                            bytes);
}

absl::Status DeviceSequential::Forward(const DevicePass& pass,
                                       absl::Span<const float> params,
                                       const StepHooks* hooks) {
  const float* in = x_.get();
  for (size_t l = 0; l < layers_.size(); ++l) {
    DeviceLayer& layer = *layers_[l];
    if (hooks != nullptr && layer.end() > layer.begin()) {
      RETURN_IF_ERROR(hooks->await_params(layer.begin(), layer.end()));
      RETURN_IF_ERROR(UploadParams(params, layer.begin(), layer.end()));
    }
    RETURN_IF_ERROR(layer.Forward(pass, in, act_[l].get()));
    in = act_[l].get();
  }
  return absl::OkStatus();
}

absl::StatusOr<double> DeviceSequential::ComputeGradients(
    absl::Span<const float> params, const float* x, const int32_t* y, int n,
    absl::Span<float> grads) {
  return Compute(params, x, y, n, grads, nullptr);
}

absl::StatusOr<double> DeviceSequential::ComputeOverlapped(
    absl::Span<const float> params, const float* x, const int32_t* y, int n,
    absl::Span<float> grads, const StepHooks& hooks) {
  return Compute(params, x, y, n, grads, &hooks);
}

absl::Status DeviceSequential::EnqueueBackward(const DevicePass& pass, int n) {
  for (size_t l = layers_.size(); l-- > 0;) {
    float* din = nullptr;
    if (l > 0) {
      din = delta_[l - 1].get();
    } else if (want_input_grad_) {
      din = dx_.get();
    }
    DeviceLayer& layer = *layers_[l];
    RETURN_IF_ERROR(layer.Backward(pass, l == 0 ? x_.get() : act_[l - 1].get(),
                                   act_[l].get(), delta_[l].get(), din));
    if (layer.end() > layer.begin()) {
      RETURN_IF_ERROR(ops_->CopyToHost(
          h_grads_.get() + layer.begin(), grads_.get() + layer.begin(),
          static_cast<size_t>(layer.end() - layer.begin()) * sizeof(float)));
      RETURN_IF_ERROR(ops_->Mark(static_cast<int>(l)));
    }
  }
  if (want_input_grad_) {
    RETURN_IF_ERROR(ops_->CopyToHost(
        h_dx_.get(), dx_.get(),
        static_cast<size_t>(n) * graph_.input.size() * sizeof(float)));
    last_n_ = n;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> DeviceSequential::Compute(absl::Span<const float> params,
                                                 const float* x,
                                                 const int32_t* y, int n,
                                                 absl::Span<float> grads,
                                                 const StepHooks* hooks) {
  RETURN_IF_ERROR(CheckStepArguments(n, max_batch_, params.size(), grads.size(),
                                     num_params_));
  const int classes = graph_.classes();
  for (int i = 0; i < n; ++i) {
    if (y[i] < 0 || y[i] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ComputeGradients: label ", y[i], " outside [0, ", classes, ")"));
    }
  }
  RETURN_IF_ERROR(UploadBatch(x, y, n));
  if (hooks == nullptr) RETURN_IF_ERROR(UploadParams(params, 0, num_params_));
  const DevicePass pass{params_.get(), grads_.get(), /*training=*/true, seed_,
                        n};
  // Whatever happens below, nothing enqueued may outlive this call's
  // buffers unfinished.
  absl::Status forward = Forward(pass, params, hooks);
  if (!forward.ok()) {
    ops_->Finish().IgnoreError();
    return forward;
  }
  const int loss_slot = static_cast<int>(layers_.size());
  RETURN_IF_ERROR(ops_->Launch(
      kernels::SoftmaxXent{act_.back().get(), y_.get(), delta_.back().get(),
                           per_sample_.get(), n, classes},
      n));
  RETURN_IF_ERROR(
      ops_->Launch(kernels::Sum{per_sample_.get(), n, sum_.get(), false}, 1));
  RETURN_IF_ERROR(ops_->CopyToHost(h_sum_.get(), sum_.get(), sizeof(double)));
  RETURN_IF_ERROR(ops_->Mark(loss_slot));
  RETURN_IF_ERROR(EnqueueBackward(pass, n));
  RETURN_IF_ERROR(ops_->WaitMark(loss_slot));
  const double loss = *h_sum_.get();
  forward_end_ = time_forward_ ? absl::Now() : absl::InfinitePast();
  if (hooks != nullptr) {
    if (absl::Status s = hooks->gradients_begin(loss / n); !s.ok()) {
      ops_->Finish().IgnoreError();
      return s;
    }
    for (size_t l = layers_.size(); l-- > 0;) {
      const DeviceLayer& layer = *layers_[l];
      if (layer.end() <= layer.begin()) continue;
      RETURN_IF_ERROR(ops_->WaitMark(static_cast<int>(l)));
      std::copy(h_grads_.get() + layer.begin(), h_grads_.get() + layer.end(),
                grads.data() + layer.begin());
      hooks->gradient_ready(layer.begin(), layer.end());
    }
  }
  RETURN_IF_ERROR(ops_->Finish());
  if (hooks == nullptr) {
    std::copy(h_grads_.get(), h_grads_.get() + num_params_, grads.data());
  }
  return loss / n;
}

absl::StatusOr<int64_t> DeviceSequential::CountCorrect(
    absl::Span<const float> params, const float* x, const int32_t* y, int n) {
  if (static_cast<int64_t>(params.size()) != num_params_) {
    return absl::InvalidArgumentError(
        absl::StrCat("CountCorrect: ", params.size(),
                     " parameters; the model has ", num_params_));
  }
  RETURN_IF_ERROR(UploadParams(params, 0, num_params_));
  RETURN_IF_ERROR(
      ops_->Launch(kernels::Sum{per_sample_.get(), 0, sum_.get(), false}, 1));
  const int64_t inputs = graph_.input.size();
  for (int begin = 0; begin < n; begin += max_batch_) {
    const int m = std::min(max_batch_, n - begin);
    // The staging holds one block: the last must be on the device.
    RETURN_IF_ERROR(ops_->Finish());
    RETURN_IF_ERROR(UploadBatch(x + begin * inputs, y + begin, m));
    const DevicePass pass{params_.get(), nullptr, /*training=*/false, seed_, m};
    RETURN_IF_ERROR(Forward(pass, params, nullptr));
    RETURN_IF_ERROR(
        ops_->Launch(kernels::Correct{act_.back().get(), y_.get(),
                                      per_sample_.get(), graph_.classes()},
                     m));
    RETURN_IF_ERROR(
        ops_->Launch(kernels::Sum{per_sample_.get(), m, sum_.get(), true}, 1));
  }
  RETURN_IF_ERROR(ops_->CopyToHost(h_sum_.get(), sum_.get(), sizeof(double)));
  RETURN_IF_ERROR(ops_->Finish());
  return static_cast<int64_t>(*h_sum_.get());
}

absl::Status DeviceSequential::Logits(absl::Span<const float> params,
                                      const float* x, int n,
                                      absl::Span<float> out) {
  if (static_cast<int64_t>(params.size()) != num_params_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Logits: ", params.size(), " parameters; the model has ", num_params_));
  }
  const int classes = graph_.classes();
  RETURN_IF_ERROR(CheckLogitsRoom(n, classes, out.size()));
  RETURN_IF_ERROR(UploadParams(params, 0, num_params_));
  const int64_t inputs = graph_.input.size();
  for (int begin = 0; begin < n; begin += max_batch_) {
    const int m = std::min(max_batch_, n - begin);
    RETURN_IF_ERROR(ops_->Finish());
    RETURN_IF_ERROR(UploadBatch(x + begin * inputs, nullptr, m));
    const DevicePass pass{params_.get(), nullptr, /*training=*/false, seed_, m};
    RETURN_IF_ERROR(Forward(pass, params, nullptr));
    RETURN_IF_ERROR(ops_->CopyToHost(
        out.data() + static_cast<size_t>(begin) * classes, act_.back().get(),
        static_cast<size_t>(m) * classes * sizeof(float)));
    RETURN_IF_ERROR(ops_->Finish());
  }
  return absl::OkStatus();
}

}  // namespace paramd
