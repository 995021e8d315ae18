// The CPU's layers: each of a layer graph's kinds (common/config/
// layer_shapes.h) as a forward and a backward pass over a batch, matrix
// products in OpenBLAS's SGEMM (worker/model/blas.h). CpuSequential
// (worker/model/sequential.h) chains them.
//
// Activations are [n × size] floats, a sample's image in C×H×W order.
// Parameters and gradients are the flat buffers of FlatLayout; a trainable
// layer knows its tensors' offsets. A layer holds scratch (im2col columns,
// pooling's argmax), so one instance serves one thread at a time.
#ifndef PARAMD_WORKER_MODEL_CPU_LAYERS_H_
#define PARAMD_WORKER_MODEL_CPU_LAYERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "worker/model/blas.h"
#include "worker/model/dropout_mask.h"
#include "worker/model/model.h"

namespace paramd {

// What one pass of a batch gives every layer.
struct LayerPass {
  absl::Span<const float> params;
  absl::Span<float> grads;           // Backward only.
  const StepHooks* hooks = nullptr;  // Overlap; null for a plain step.
  bool training = false;             // Dropout is the identity otherwise.
  uint64_t seed = 0;                 // The step's (dropout masks).
  int n = 0;                         // Samples in the batch.
};

class CpuLayer {
 public:
  virtual ~CpuLayer() = default;

  // out [n × out.size()] from in [n × in.size()]. With hooks, waits for
  // each piece of the layer's parameters before it reads it.
  virtual absl::Status Forward(const LayerPass& pass, const float* in,
                               float* out) = 0;

  // From dout = d(loss)/d(out): the layer's parameter gradients into
  // pass.grads (each range handed to pass.hooks as soon as it is final)
  // and, when `din` is not null, d(loss)/d(in). `in` and `out` are the
  // forward pass's.
  virtual void Backward(const LayerPass& pass, const float* in,
                        const float* out, const float* dout, float* din) = 0;
};

// The layer `layer` of a graph, its tensors where `tensors` says they lie
// in the flat parameters. `blas` must outlive the layer.
std::unique_ptr<CpuLayer> MakeCpuLayer(const GraphLayer& layer,
                                       const LayerTensors& tensors,
                                       const Blas* blas);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CPU_LAYERS_H_
