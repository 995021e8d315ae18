// The CUDA backend for programs: any layer graph on a CUDA GPU, as a
// DeviceSequential (worker/model/device_sequential.h) over the device
// backend — a stream, cuBLAS and paramd's kernels — of the plugin
// libparamd_cuda.so, built beside paramd-worker when a CUDA toolkit is
// there at build time and loaded on first use (worker/model/
// cuda_backend_api.h says why). These functions load it once and call it.
// Without the plugin each answers UNAVAILABLE, saying the backend was left
// out. Thread-safe.
#ifndef PARAMD_WORKER_MODEL_CUDA_BACKEND_H_
#define PARAMD_WORKER_MODEL_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/config/layer_shapes.h"
#include "worker/model/device_ops.h"
#include "worker/model/model.h"

namespace paramd {

// OK when a CUDA device can be used; otherwise why not, e.g. "no CUDA
// driver (cudaGetDeviceCount: cudaErrorInsufficientDriver: ...)" or "this
// build has no CUDA backend".
absl::Status CudaDeviceStatus();

// The graph on device 0, for batches of up to `max_batch`; TF32 in the
// products only when allowed. With `profile`, the device time of every
// operation is added to it (benchmarks).
absl::StatusOr<std::unique_ptr<Model>> MakeCudaModel(
    const LayerGraph& graph, int max_batch, bool allow_tf32,
    DeviceProfile* profile = nullptr);

// The CUDA device backend itself, for the device layers alone (tests).
absl::StatusOr<std::unique_ptr<DeviceOps>> MakeCudaOps(
    bool allow_tf32, DeviceProfile* profile = nullptr);

// cuBLAS SGEMM throughput for row-major C[m×n] = A[m×k]·B[k×n] on device 0,
// in TFLOP/s over `iterations` calls (for benchmarks).
absl::StatusOr<double> CudaSgemmTflops(int m, int n, int k, bool allow_tf32,
                                       int iterations);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CUDA_BACKEND_H_
