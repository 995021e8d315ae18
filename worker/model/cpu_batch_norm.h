// Batch norm on the CPU: per channel (an image's C planes, or a flat
// vector's features), over the batch.
//
// Training normalises with the batch's mean and (biased) variance and
// scales by gamma, shifts by beta (trained on the servers like any
// tensor). The running mean and variance are statistics
// (TensorKind::kStatistic) held by the servers: each step's push carries,
// in their place, momentum × (the batch's statistic − the running value
// the worker pulled), the variance unbiased as PyTorch keeps it; the
// servers add the round's mean of those under sync (so every worker
// evaluates with the same statistics, and checkpoints carry them) and each
// push under async and ssp. Evaluation normalises with the running values.
#ifndef PARAMD_WORKER_MODEL_CPU_BATCH_NORM_H_
#define PARAMD_WORKER_MODEL_CPU_BATCH_NORM_H_

#include <memory>

#include "common/config/layer_shapes.h"
#include "worker/model/cpu_layers.h"

namespace paramd {

// The batch_norm layer `layer`: weight, bias, running_mean, running_var
// ([C] each) where `tensors` says.
std::unique_ptr<CpuLayer> MakeCpuBatchNorm(const GraphLayer& layer,
                                           const LayerTensors& tensors);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CPU_BATCH_NORM_H_
