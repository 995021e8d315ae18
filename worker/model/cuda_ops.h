// The CUDA device backend (worker/model/device_ops.h) inside the plugin
// libparamd_cuda.so: one non-blocking stream on device 0, cuBLAS SGEMM on
// it (TF32 only when allowed), the device kernels launched on it
// (worker/model/cuda_launch.h), pinned host staging, and events for marks.
// Every CUDA and cuBLAS call is checked; a failure becomes a status naming
// the call.
#ifndef PARAMD_WORKER_MODEL_CUDA_OPS_H_
#define PARAMD_WORKER_MODEL_CUDA_OPS_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/device_ops.h"

namespace paramd {

// OK when a CUDA device can be used; otherwise why not.
absl::Status CudaDevicePresent();

// The backend on device 0; with `profile`, every operation's device time
// is added to it (DeviceOps::Profile).
absl::StatusOr<std::unique_ptr<DeviceOps>> NewCudaOps(bool allow_tf32,
                                                      DeviceProfile* profile);

// cuBLAS SGEMM throughput for row-major C[m×n] = A[m×k]·B[k×n] on device 0,
// in TFLOP/s over `iterations` calls.
absl::StatusOr<double> CudaSgemmThroughput(int m, int n, int k, bool allow_tf32,
                                           int iterations);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CUDA_OPS_H_
