// Conv2d on the CPU: each sample's receptive fields laid out as columns
// (im2col), then SGEMMs per sample: out = W · col forward, dW += dout ·
// colᵀ and dcol = Wᵀ · dout backward (col2im adds dcol onto the input).
//
// Why im2col: it turns the convolution into the product OpenBLAS runs at
// full speed, at the cost of kernel² copies of the input. Per-sample
// products write the [n × C × H × W] layout directly, with no transposes.
#ifndef PARAMD_WORKER_MODEL_CPU_CONV2D_H_
#define PARAMD_WORKER_MODEL_CPU_CONV2D_H_

#include <memory>

#include "common/config/layer_shapes.h"
#include "worker/model/blas.h"
#include "worker/model/cpu_layers.h"

namespace paramd {

// The conv2d layer `layer`: weight [out, in, k, k] and bias [out] where
// `tensors` says.
std::unique_ptr<CpuLayer> MakeCpuConv2d(const GraphLayer& layer,
                                        const LayerTensors& tensors,
                                        const Blas* blas);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CPU_CONV2D_H_
