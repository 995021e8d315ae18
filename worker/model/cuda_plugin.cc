// The plugin libparamd_cuda.so's entry point (worker/model/cuda_backend_api.h):
// the CUDA device backend, on which programs run their layer graphs.
#include "worker/model/cuda_backend_api.h"
#include "worker/model/cuda_ops.h"

extern "C" const paramd::CudaBackendApi* ParamdCudaBackend() {
  static const paramd::CudaBackendApi api = {
      paramd::kCudaBackendAbi, &paramd::CudaDevicePresent, &paramd::NewCudaOps,
      &paramd::CudaSgemmThroughput};
  return &api;
}
