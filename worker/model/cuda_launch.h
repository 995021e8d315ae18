// Launchers for the device kernels (worker/model/device_kernels.h) on a
// CUDA stream: one thread per element, in a grid-stride loop. Each returns
// the launch's cudaError_t as an int, so that this header needs no CUDA
// headers (worker/model/cuda_launch.cu holds the kernels).
#ifndef PARAMD_WORKER_MODEL_CUDA_LAUNCH_H_
#define PARAMD_WORKER_MODEL_CUDA_LAUNCH_H_

#include <cstdint>

#include "worker/model/device_kernels.h"

namespace paramd::cuda {

#define PARAMD_DECLARE_CUDA_LAUNCH(F) \
  int Launch(const kernels::F& f, int64_t count, void* stream);
PARAMD_DEVICE_KERNELS(PARAMD_DECLARE_CUDA_LAUNCH)
#undef PARAMD_DECLARE_CUDA_LAUNCH

}  // namespace paramd::cuda

#endif  // PARAMD_WORKER_MODEL_CUDA_LAUNCH_H_
