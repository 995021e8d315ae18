// The MLP on a CUDA GPU: cuBLAS SGEMM for the dense layers, kernels for
// bias, ReLU, softmax cross-entropy and reductions
// (worker/model/cuda_kernels.cu).
//
// Per step the parameters go up once into device buffers from pinned host
// memory, layer by layer on a copy stream, so layer l's forward pass starts
// as soon as its weights are there; each layer's gradients go back to
// pinned memory on the copy stream as soon as the backward pass has made
// them. TF32 is off unless worker.allow_tf32. Every CUDA and cuBLAS call is
// checked; a failure becomes a status naming the call.
//
// The backend lives in a plugin, libparamd_cuda.so, built beside
// paramd-worker when a CUDA toolkit is there at build time and loaded on
// first use (worker/model/cuda_backend_api.h says why); these functions load it
// once and call it. Without the plugin each answers UNAVAILABLE, saying the
// backend was left out. Thread-safe.
#ifndef PARAMD_WORKER_MODEL_CUDA_MLP_H_
#define PARAMD_WORKER_MODEL_CUDA_MLP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "worker/model/model.h"

namespace paramd {

// OK when a CUDA device can be used; otherwise why not, e.g. "no CUDA
// driver (cudaGetDeviceCount: cudaErrorInsufficientDriver: ...)" or "this
// build has no CUDA backend".
absl::Status CudaDeviceStatus();

// The MLP of `layers` on device 0, for batches of up to `max_batch`.
absl::StatusOr<std::unique_ptr<Model>> MakeCudaMlp(
    const std::vector<int>& layers, int max_batch, bool allow_tf32);

// cuBLAS SGEMM throughput for row-major C[m×n] = A[m×k]·B[k×n] on device 0,
// in TFLOP/s over `iterations` calls (for benchmarks).
absl::StatusOr<double> CudaSgemmTflops(int m, int n, int k, bool allow_tf32,
                                       int iterations);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CUDA_MLP_H_
