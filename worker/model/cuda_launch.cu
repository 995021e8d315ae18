// The device kernels' CUDA launches: every functor of
// worker/model/device_kernels.h through one grid-stride kernel template.
#include <cuda_runtime.h>

#include "worker/model/cuda_launch.h"

namespace paramd::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU; larger counts loop.
constexpr int64_t kMaxBlocks = 65536;

template <typename F>
__global__ void ForEach(F f, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    f(i);
  }
}

template <typename F>
int LaunchOn(const F& f, int64_t count, void* stream) {
  if (count <= 0) return static_cast<int>(cudaSuccess);
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  ForEach<F><<<static_cast<unsigned>(blocks), kThreads, 0,
               static_cast<cudaStream_t>(stream)>>>(f, count);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

#define PARAMD_DEFINE_CUDA_LAUNCH(F)                             \
  int Launch(const kernels::F& f, int64_t count, void* stream) { \
    return LaunchOn(f, count, stream);                           \
  }
PARAMD_DEVICE_KERNELS(PARAMD_DEFINE_CUDA_LAUNCH)
#undef PARAMD_DEFINE_CUDA_LAUNCH

}  // namespace paramd::cuda
