// The device's layers: each of a layer graph's kinds (common/config/
// layer_shapes.h) as a forward and a backward pass over a batch in a
// device backend's memory (worker/model/device_ops.h) — matrix products
// by the backend's GEMM (cuBLAS on CUDA), everything else the kernels of
// worker/model/device_kernels.h. They compute what the CPU's layers
// (worker/model/cpu_layers.h) compute, in another order of summation where
// one product covers the whole batch.
//
// Conv2d lays the batch's receptive fields out as one matrix (im2col),
// so that forward, the weight gradient and the input gradient are one
// GEMM each for the whole batch; pooling keeps its argmax; batch norm
// sums per channel in fixed slices (no atomics: the same bits every run).
// A layer holds its scratch, sized for `max_batch` when it is made, so one
// instance serves one thread at a time.
#ifndef PARAMD_WORKER_MODEL_DEVICE_LAYERS_H_
#define PARAMD_WORKER_MODEL_DEVICE_LAYERS_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "worker/model/device_ops.h"

namespace paramd {

// What one pass of a batch gives every layer; pointers are device memory.
struct DevicePass {
  const float* params = nullptr;
  float* grads = nullptr;  // Backward only.
  bool training = false;   // Dropout is the identity otherwise.
  uint64_t seed = 0;       // The step's (dropout masks).
  int n = 0;               // Samples in the batch.
};

class DeviceLayer {
 public:
  virtual ~DeviceLayer() = default;

  // Enqueues out [n × out.size()] from in [n × in.size()].
  virtual absl::Status Forward(const DevicePass& pass, const float* in,
                               float* out) = 0;
  // Enqueues the layer's parameter gradients into pass.grads and, when
  // `din` is not null, d(loss)/d(in), from dout = d(loss)/d(out); `in` and
  // `out` are the forward pass's.
  virtual absl::Status Backward(const DevicePass& pass, const float* in,
                                const float* out, const float* dout,
                                float* din) = 0;

  // The flat range of the layer's tensors [begin, end); empty for layers
  // without tensors.
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }

 protected:
  int64_t begin_ = 0, end_ = 0;
};

// The layer `layer` of a graph on `ops` (which must outlive it), its
// tensors where `tensors` says they lie, with scratch for batches of up to
// `max_batch`.
absl::StatusOr<std::unique_ptr<DeviceLayer>> MakeDeviceLayer(
    const GraphLayer& layer, const LayerTensors& tensors, DeviceOps* ops,
    int max_batch);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_DEVICE_LAYERS_H_
