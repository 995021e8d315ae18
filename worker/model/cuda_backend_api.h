// The CUDA backend's entry points as libparamd_cuda.so exports them, for
// worker/model/cuda_loader.cc. The plugin is built from this tree by the same
// compiler as the program that loads it, so the table may carry C++ types;
// kCudaBackendAbi changes whenever the table or those types change, and a
// plugin of another version is refused.
//
// Why a plugin: cuBLAS (libcublasLt alone holds 94 KB of thread-local
// storage) would otherwise sit in every worker thread's static TLS, and
// civetweb, under the metrics endpoint, starts its threads with fixed
// 100 KB stacks that then cannot hold it (pthread_create: EINVAL). Loaded
// with dlopen, the CUDA libraries' TLS is allocated per thread on use, and a
// worker without CUDA libraries installed starts all the same.
#ifndef PARAMD_WORKER_MODEL_CUDA_BACKEND_API_H_
#define PARAMD_WORKER_MODEL_CUDA_BACKEND_API_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/device_ops.h"

namespace paramd {

// 2: the device backend (make_ops), on which the program runs any layer
// graph, where 1 had a whole MLP inside.
inline constexpr int kCudaBackendAbi = 2;

struct CudaBackendApi {
  int abi;  // kCudaBackendAbi of the plugin's build.
  absl::Status (*device_status)();
  absl::StatusOr<std::unique_ptr<DeviceOps>> (*make_ops)(
      bool allow_tf32, DeviceProfile* profile);
  absl::StatusOr<double> (*sgemm_tflops)(int m, int n, int k, bool allow_tf32,
                                         int iterations);
};

}  // namespace paramd

// The symbol the loader looks up.
extern "C" const paramd::CudaBackendApi* ParamdCudaBackend();

#endif  // PARAMD_WORKER_MODEL_CUDA_BACKEND_API_H_
