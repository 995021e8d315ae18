// DeviceSequential: a layer graph (common/config/layer_shapes.h) on a device
// backend (worker/model/device_ops.h) — the CUDA GPU in the plugin, or the
// host backend of the tests — its layers (worker/model/device_layers.h) run
// in order, ending in softmax cross-entropy. What CpuSequential is for the
// CPU: any graph, the width shorthand's MLP included.
//
// Per step, only what the wire needs crosses to the host: the parameters
// go up (through pinned staging), the gradients, the loss and, with an
// input gradient (an embedding front), d(loss)/d(x) come back. Under
// StepHooks (worker.overlap) a layer's parameters go up as soon as the
// exchange brings them, while earlier layers compute, and each layer's
// gradients are handed on as soon as they are home, while earlier layers'
// backward passes still run.
#ifndef PARAMD_WORKER_MODEL_DEVICE_SEQUENTIAL_H_
#define PARAMD_WORKER_MODEL_DEVICE_SEQUENTIAL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/layer_shapes.h"
#include "worker/model/device_layers.h"
#include "worker/model/device_ops.h"
#include "worker/model/model.h"

namespace paramd {

class DeviceSequential : public Model {
 public:
  // The graph on `ops`, for batches of up to `max_batch` (evaluation goes
  // in blocks of it). Fails when the device cannot hold it.
  static absl::StatusOr<std::unique_ptr<DeviceSequential>> Create(
      LayerGraph graph, int max_batch, std::unique_ptr<DeviceOps> ops);

  std::string Describe() const override { return ops_->Describe(); }
  void SetStepSeed(uint64_t seed) override { seed_ = seed; }
  void TimeForward(bool on) override { time_forward_ = on; }
  absl::Time ForwardEnd() const override { return forward_end_; }
  absl::StatusOr<double> ComputeGradients(absl::Span<const float> params,
                                          const float* x, const int32_t* y,
                                          int n,
                                          absl::Span<float> grads) override;
  absl::StatusOr<double> ComputeOverlapped(absl::Span<const float> params,
                                           const float* x, const int32_t* y,
                                           int n, absl::Span<float> grads,
                                           const StepHooks& hooks) override;
  absl::Status EnableInputGradient() override;
  absl::Span<const float> InputGradient() const override;
  absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                       const float* x, const int32_t* y,
                                       int n) override;
  absl::Status Logits(absl::Span<const float> params, const float* x, int n,
                      absl::Span<float> out) override;

 private:
  DeviceSequential(LayerGraph graph, int max_batch,
                   std::unique_ptr<DeviceOps> ops);
  absl::Status Init();
  absl::StatusOr<double> Compute(absl::Span<const float> params, const float* x,
                                 const int32_t* y, int n,
                                 absl::Span<float> grads,
                                 const StepHooks* hooks);
  // Stages the batch (and its labels, where y is not null) and sends it
  // up.
  absl::Status UploadBatch(const float* x, const int32_t* y, int n);
  // Sends params [begin, end) up through the pinned staging.
  absl::Status UploadParams(absl::Span<const float> params, int64_t begin,
                            int64_t end);
  // Enqueues the layers' forward passes on the batch in x_; with hooks,
  // each trainable layer's parameters are awaited and sent up first.
  absl::Status Forward(const DevicePass& pass, absl::Span<const float> params,
                       const StepHooks* hooks);
  // The whole backward pass of a batch of `n`, enqueued before the host
  // waits on anything: each trainable layer's gradients go home (to
  // h_grads_, marked with the layer's index) as soon as they are made, and
  // with an input gradient asked for, dx too.
  absl::Status EnqueueBackward(const DevicePass& pass, int n);

  // Declared first: the arrays below are freed through it.
  const std::unique_ptr<DeviceOps> ops_;
  const LayerGraph graph_;
  const int max_batch_;
  std::vector<std::unique_ptr<DeviceLayer>> layers_;
  int64_t num_params_ = 0;
  uint64_t seed_ = 0;
  bool time_forward_ = false;
  absl::Time forward_end_ = absl::InfinitePast();
  // Device: parameters, gradients, the batch, every layer's output and its
  // gradient, per-sample losses/correct flags and their sum.
  DeviceArray<float> params_, grads_, x_;
  DeviceArray<int32_t> y_;
  std::vector<DeviceArray<float>> act_, delta_;
  DeviceArray<double> per_sample_, sum_;
  // Pinned host staging.
  DeviceArray<float> h_params_, h_grads_, h_x_;
  DeviceArray<int32_t> h_y_;
  DeviceArray<double> h_sum_;
  // d(loss)/d(x) of the last batch (of last_n_), once enabled.
  bool want_input_grad_ = false;
  int last_n_ = 0;
  DeviceArray<float> dx_, h_dx_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_DEVICE_SEQUENTIAL_H_
