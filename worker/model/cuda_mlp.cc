// The CUDA backend proper, built into libparamd_cuda.so (see
// worker/model/cuda_backend_api.h); programs reach it through
// worker/model/cuda_mlp.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "worker/model/cuda_backend_api.h"
#include "worker/model/cuda_kernels.h"

namespace paramd {
namespace {

absl::Status CudaCheck(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorName(e), ": ",
                                          cudaGetErrorString(e)));
}

absl::Status KernelCheck(int e, const char* kernel) {
  return CudaCheck(static_cast<cudaError_t>(e), kernel);
}

absl::Status BlasCheck(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, ": cuBLAS status ", static_cast<int>(s)));
}

// Returns from the calling function when a CUDA, kernel or cuBLAS call
// fails, with a status naming the call.
#define PARAMD_CUDA(call)                      \
  do {                                         \
    RETURN_IF_ERROR(CudaCheck((call), #call)); \
  } while (0)
#define PARAMD_KERNEL(call)                      \
  do {                                           \
    RETURN_IF_ERROR(KernelCheck((call), #call)); \
  } while (0)
#define PARAMD_CUBLAS(call)                    \
  do {                                         \
    RETURN_IF_ERROR(BlasCheck((call), #call)); \
  } while (0)

// Row-major C[m×n] = op(A)·op(B) + beta·C through column-major cuBLAS:
// computes Cᵀ = op(B)ᵀ·op(A)ᵀ. lda/ldb/ldc are the row-major row lengths.
cublasStatus_t RowMajorSgemm(cublasHandle_t h, bool trans_a, bool trans_b,
                             int m, int n, int k, const float* a, int lda,
                             const float* b, int ldb, float beta, float* c,
                             int ldc) {
  const float alpha = 1.0f;
  return cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                     ldb, a, lda, &beta, c, ldc);
}

// Memory owned by one pointer, freed by `Free`; move-only, so that vectors
// of buffers can grow without freeing memory still in use.
template <typename T, cudaError_t (*Free)(void*)>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  OwnedBuffer(OwnedBuffer&& other) noexcept : ptr(other.ptr) {
    other.ptr = nullptr;
  }
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
    std::swap(ptr, other.ptr);
    return *this;
  }
  ~OwnedBuffer() {
    if (ptr != nullptr) Free(ptr);
  }

  T* ptr = nullptr;
};

template <typename T>
struct DeviceBuffer : OwnedBuffer<T, cudaFree> {
  absl::Status Allocate(size_t count) {
    PARAMD_CUDA(
        cudaMalloc(reinterpret_cast<void**>(&this->ptr), count * sizeof(T)));
    return absl::OkStatus();
  }
};

template <typename T>
struct PinnedBuffer : OwnedBuffer<T, cudaFreeHost> {
  absl::Status Allocate(size_t count) {
    PARAMD_CUDA(cudaMallocHost(reinterpret_cast<void**>(&this->ptr),
                               count * sizeof(T)));
    return absl::OkStatus();
  }
};

class CudaMlp : public Model {
 public:
  CudaMlp(std::vector<int> layers, int max_batch, bool allow_tf32)
      : layers_(std::move(layers)),
        max_batch_(max_batch),
        allow_tf32_(allow_tf32) {}

  ~CudaMlp() override {
    if (handle_ != nullptr) cublasDestroy(handle_);
    for (cudaEvent_t e : uploaded_) cudaEventDestroy(e);
    for (cudaEvent_t e : computed_) cudaEventDestroy(e);
    if (compute_ != nullptr) cudaStreamDestroy(compute_);
    if (copy_ != nullptr) cudaStreamDestroy(copy_);
  }

  absl::Status Init() {
    PARAMD_CUDA(cudaSetDevice(0));
    cudaDeviceProp prop;
    PARAMD_CUDA(cudaGetDeviceProperties(&prop, 0));
    device_name_ = prop.name;
    PARAMD_CUDA(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    PARAMD_CUDA(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    PARAMD_CUBLAS(cublasCreate(&handle_));
    PARAMD_CUBLAS(cublasSetStream(handle_, compute_));
    PARAMD_CUBLAS(cublasSetMathMode(handle_, allow_tf32_
                                                 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                 : CUBLAS_PEDANTIC_MATH));
    const int num_layers = static_cast<int>(layers_.size()) - 1;
    act_.reserve(num_layers);
    delta_.reserve(num_layers);
    for (int l = 0; l < num_layers; ++l) {
      weight_offset_.push_back(total_);
      total_ += int64_t{layers_[l]} * layers_[l + 1];
      bias_offset_.push_back(total_);
      total_ += layers_[l + 1];
      act_.emplace_back();
      delta_.emplace_back();
      RETURN_IF_ERROR(
          act_.back().Allocate(size_t(max_batch_) * layers_[l + 1]));
      RETURN_IF_ERROR(
          delta_.back().Allocate(size_t(max_batch_) * layers_[l + 1]));
      uploaded_.push_back(nullptr);
      computed_.push_back(nullptr);
      PARAMD_CUDA(
          cudaEventCreateWithFlags(&uploaded_.back(), cudaEventDisableTiming));
      PARAMD_CUDA(
          cudaEventCreateWithFlags(&computed_.back(), cudaEventDisableTiming));
    }
    for (auto s : {d_params_.Allocate(total_), d_grads_.Allocate(total_),
                   d_x_.Allocate(size_t(max_batch_) * layers_[0]),
                   d_loss_.Allocate(max_batch_), d_loss_sum_.Allocate(1),
                   h_params_.Allocate(total_), h_grads_.Allocate(total_),
                   h_x_.Allocate(size_t(max_batch_) * layers_[0]),
                   h_loss_sum_.Allocate(1)}) {
      if (!s.ok()) return s;
    }
    for (auto s : {d_y_.Allocate(max_batch_), h_y_.Allocate(max_batch_)}) {
      if (!s.ok()) return s;
    }
    RETURN_IF_ERROR(d_correct_.Allocate(1));
    RETURN_IF_ERROR(h_correct_.Allocate(1));
    return absl::OkStatus();
  }

  absl::Status EnableInputGradient() override {
    if (!want_input_grad_) {
      RETURN_IF_ERROR(d_dx_.Allocate(size_t(max_batch_) * layers_[0]));
      RETURN_IF_ERROR(h_dx_.Allocate(size_t(max_batch_) * layers_[0]));
      want_input_grad_ = true;
    }
    return absl::OkStatus();
  }

  absl::Span<const float> InputGradient() const override {
    if (!want_input_grad_) return {};
    return absl::MakeConstSpan(h_dx_.ptr, size_t(last_n_) * layers_[0]);
  }

  std::string Describe() const override {
    return absl::StrCat("cuda (", device_name_, ", cuBLAS SGEMM, TF32 ",
                        allow_tf32_ ? "allowed" : "off", ")");
  }

  absl::StatusOr<double> ComputeGradients(absl::Span<const float> params,
                                          const float* x, const int32_t* y,
                                          int n,
                                          absl::Span<float> grads) override {
    if (n < 1 || n > max_batch_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ComputeGradients: batch of ", n, " outside [1, ", max_batch_, "]"));
    }
    if (static_cast<int64_t>(params.size()) != total_ ||
        grads.size() != params.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ComputeGradients: ", params.size(), " parameters and ",
                       grads.size(), " gradients; the model has ", total_));
    }
    const int classes = layers_.back();
    for (int i = 0; i < n; ++i) {
      if (y[i] < 0 || y[i] >= classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ComputeGradients: label ", y[i], " outside [0, ", classes, ")"));
      }
    }
    RETURN_IF_ERROR(Upload(params, x, y, n));
    RETURN_IF_ERROR(Forward(n));
    const int num_layers = static_cast<int>(act_.size());
    PARAMD_KERNEL(cuda::SoftmaxXent(act_.back().ptr, d_y_.ptr, n, classes,
                                    delta_.back().ptr, d_loss_.ptr, compute_));
    PARAMD_KERNEL(cuda::Sum(d_loss_.ptr, n, d_loss_sum_.ptr, compute_));
    PARAMD_CUDA(cudaMemcpyAsync(h_loss_sum_.ptr, d_loss_sum_.ptr, sizeof(float),
                                cudaMemcpyDeviceToHost, compute_));
    for (int l = num_layers - 1; l >= 0; --l) {
      const int fan_in = layers_[l], fan_out = layers_[l + 1];
      const float* in = l == 0 ? d_x_.ptr : act_[l - 1].ptr;
      // dW = inᵀ · delta, db = column sums of delta.
      PARAMD_CUBLAS(RowMajorSgemm(handle_, true, false, fan_in, fan_out, n, in,
                                  fan_in, delta_[l].ptr, fan_out, 0.0f,
                                  d_grads_.ptr + weight_offset_[l], fan_out));
      PARAMD_KERNEL(cuda::ColumnSums(delta_[l].ptr, n, fan_out,
                                     d_grads_.ptr + bias_offset_[l], compute_));
      // This layer's gradients go home while earlier layers are computed.
      PARAMD_CUDA(cudaEventRecord(computed_[l], compute_));
      PARAMD_CUDA(cudaStreamWaitEvent(copy_, computed_[l], 0));
      const int64_t begin = weight_offset_[l];
      const int64_t end = bias_offset_[l] + fan_out;
      PARAMD_CUDA(cudaMemcpyAsync(h_grads_.ptr + begin, d_grads_.ptr + begin,
                                  (end - begin) * sizeof(float),
                                  cudaMemcpyDeviceToHost, copy_));
      if (l == 0) {
        if (want_input_grad_) {
          // dx = delta_0 · W_0ᵀ (no activation before the first layer),
          // home on the compute stream.
          PARAMD_CUBLAS(RowMajorSgemm(handle_, false, true, n, fan_in, fan_out,
                                      delta_[0].ptr, fan_out,
                                      d_params_.ptr + weight_offset_[0],
                                      fan_out, 0.0f, d_dx_.ptr, fan_in));
          PARAMD_CUDA(cudaMemcpyAsync(h_dx_.ptr, d_dx_.ptr,
                                      size_t(n) * fan_in * sizeof(float),
                                      cudaMemcpyDeviceToHost, compute_));
          last_n_ = n;
        }
        break;
      }
      // delta_{l-1} = (delta · Wᵀ) ⊙ relu'(act_{l-1})
      PARAMD_CUBLAS(RowMajorSgemm(handle_, false, true, n, fan_in, fan_out,
                                  delta_[l].ptr, fan_out,
                                  d_params_.ptr + weight_offset_[l], fan_out,
                                  0.0f, delta_[l - 1].ptr, fan_in));
      PARAMD_KERNEL(cuda::ReluBackward(delta_[l - 1].ptr, act_[l - 1].ptr,
                                       int64_t{n} * fan_in, compute_));
    }
    PARAMD_CUDA(cudaStreamSynchronize(copy_));
    PARAMD_CUDA(cudaStreamSynchronize(compute_));
    std::memcpy(grads.data(), h_grads_.ptr, total_ * sizeof(float));
    return static_cast<double>(*h_loss_sum_.ptr) / n;
  }

  absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                       const float* x, const int32_t* y,
                                       int n) override {
    if (static_cast<int64_t>(params.size()) != total_) {
      return absl::InvalidArgumentError(
          absl::StrCat("CountCorrect: ", params.size(),
                       " parameters; the model has ", total_));
    }
    *h_correct_.ptr = 0;
    PARAMD_CUDA(cudaMemcpyAsync(d_correct_.ptr, h_correct_.ptr,
                                sizeof(unsigned), cudaMemcpyHostToDevice,
                                compute_));
    for (int begin = 0; begin < n; begin += max_batch_) {
      const int m = std::min(max_batch_, n - begin);
      // Parameters go up with the first block only.
      RETURN_IF_ERROR(Upload(begin == 0 ? params : absl::Span<const float>(),
                             x + int64_t{begin} * layers_[0], y + begin, m));
      RETURN_IF_ERROR(Forward(m));
      PARAMD_KERNEL(cuda::CountCorrect(act_.back().ptr, d_y_.ptr, m,
                                       layers_.back(), d_correct_.ptr,
                                       compute_));
      // The next block's inputs overwrite this one's: finish it first.
      PARAMD_CUDA(cudaStreamSynchronize(compute_));
    }
    PARAMD_CUDA(cudaMemcpyAsync(h_correct_.ptr, d_correct_.ptr,
                                sizeof(unsigned), cudaMemcpyDeviceToHost,
                                compute_));
    PARAMD_CUDA(cudaStreamSynchronize(compute_));
    return static_cast<int64_t>(*h_correct_.ptr);
  }

 private:
  // Stages inputs in pinned memory and sends them up; parameters (when
  // given) go layer by layer on the copy stream, each marked by an event.
  absl::Status Upload(absl::Span<const float> params, const float* x,
                      const int32_t* y, int n) {
    std::memcpy(h_x_.ptr, x, size_t(n) * layers_[0] * sizeof(float));
    std::memcpy(h_y_.ptr, y, size_t(n) * sizeof(int32_t));
    PARAMD_CUDA(cudaMemcpyAsync(d_x_.ptr, h_x_.ptr,
                                size_t(n) * layers_[0] * sizeof(float),
                                cudaMemcpyHostToDevice, compute_));
    PARAMD_CUDA(cudaMemcpyAsync(d_y_.ptr, h_y_.ptr, size_t(n) * sizeof(int32_t),
                                cudaMemcpyHostToDevice, compute_));
    if (params.empty()) return absl::OkStatus();
    // The previous step's downloads read h_grads_, not h_params_; but the
    // copy stream must be idle before h_params_ is rewritten.
    PARAMD_CUDA(cudaStreamSynchronize(copy_));
    std::memcpy(h_params_.ptr, params.data(), total_ * sizeof(float));
    for (size_t l = 0; l < act_.size(); ++l) {
      const int64_t begin = weight_offset_[l];
      const int64_t end = bias_offset_[l] + layers_[l + 1];
      PARAMD_CUDA(cudaMemcpyAsync(d_params_.ptr + begin, h_params_.ptr + begin,
                                  (end - begin) * sizeof(float),
                                  cudaMemcpyHostToDevice, copy_));
      PARAMD_CUDA(cudaEventRecord(uploaded_[l], copy_));
    }
    return absl::OkStatus();
  }

  // act_[l] = layer l's output; each layer waits for its parameters.
  absl::Status Forward(int n) {
    const int num_layers = static_cast<int>(act_.size());
    const float* in = d_x_.ptr;
    for (int l = 0; l < num_layers; ++l) {
      const int fan_in = layers_[l], fan_out = layers_[l + 1];
      PARAMD_CUDA(cudaStreamWaitEvent(compute_, uploaded_[l], 0));
      PARAMD_CUBLAS(RowMajorSgemm(handle_, false, false, n, fan_out, fan_in, in,
                                  fan_in, d_params_.ptr + weight_offset_[l],
                                  fan_out, 0.0f, act_[l].ptr, fan_out));
      PARAMD_KERNEL(cuda::AddBias(act_[l].ptr, d_params_.ptr + bias_offset_[l],
                                  n, fan_out, compute_));
      if (l + 1 < num_layers) {
        PARAMD_KERNEL(cuda::Relu(act_[l].ptr, int64_t{n} * fan_out, compute_));
      }
      in = act_[l].ptr;
    }
    return absl::OkStatus();
  }

  const std::vector<int> layers_;
  const int max_batch_;
  const bool allow_tf32_;
  std::string device_name_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  std::vector<cudaEvent_t> uploaded_, computed_;
  std::vector<int64_t> weight_offset_, bias_offset_;
  int64_t total_ = 0;
  std::vector<DeviceBuffer<float>> act_, delta_;
  DeviceBuffer<float> d_params_, d_grads_, d_x_, d_loss_, d_loss_sum_;
  DeviceBuffer<int32_t> d_y_;
  DeviceBuffer<unsigned> d_correct_;
  PinnedBuffer<float> h_params_, h_grads_, h_x_, h_loss_sum_;
  PinnedBuffer<int32_t> h_y_;
  PinnedBuffer<unsigned> h_correct_;
  // d(loss)/d(x) of the last batch (of last_n_), once enabled.
  bool want_input_grad_ = false;
  int last_n_ = 0;
  DeviceBuffer<float> d_dx_;
  PinnedBuffer<float> h_dx_;
};

absl::Status CudaDeviceStatus() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) {
    return absl::UnavailableError(absl::StrCat(
        e == cudaErrorNoDevice ? "no CUDA device" : "no CUDA driver",
        " (cudaGetDeviceCount: ", cudaGetErrorName(e), ": ",
        cudaGetErrorString(e), ")"));
  }
  RETURN_IF_ERROR(CudaCheck(e, "cudaGetDeviceCount"));
  if (count < 1) return absl::UnavailableError("no CUDA device");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> MakeCudaMlp(
    const std::vector<int>& layers, int max_batch, bool allow_tf32) {
  RETURN_IF_ERROR(CudaDeviceStatus());
  auto mlp = std::make_unique<CudaMlp>(layers, max_batch, allow_tf32);
  RETURN_IF_ERROR(mlp->Init());
  return std::unique_ptr<Model>(std::move(mlp));
}

absl::StatusOr<double> CudaSgemmTflops(int m, int n, int k, bool allow_tf32,
                                       int iterations) {
  RETURN_IF_ERROR(CudaDeviceStatus());
  DeviceBuffer<float> a, b, c;
  for (auto s : {a.Allocate(size_t(m) * k), b.Allocate(size_t(k) * n),
                 c.Allocate(size_t(m) * n)}) {
    if (!s.ok()) return s;
  }
  PARAMD_CUDA(cudaMemset(a.ptr, 0, size_t(m) * k * sizeof(float)));
  PARAMD_CUDA(cudaMemset(b.ptr, 0, size_t(k) * n * sizeof(float)));
  cublasHandle_t h;
  PARAMD_CUBLAS(cublasCreate(&h));
  std::unique_ptr<cublasContext, decltype(&cublasDestroy)> owner(
      h, &cublasDestroy);
  PARAMD_CUBLAS(cublasSetMathMode(
      h, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  PARAMD_CUBLAS(RowMajorSgemm(h, false, false, m, n, k, a.ptr, k, b.ptr, n,
                              0.0f, c.ptr, n));  // warm-up
  cudaEvent_t start, stop;
  PARAMD_CUDA(cudaEventCreate(&start));
  PARAMD_CUDA(cudaEventCreate(&stop));
  PARAMD_CUDA(cudaEventRecord(start, nullptr));
  for (int i = 0; i < iterations; ++i) {
    PARAMD_CUBLAS(RowMajorSgemm(h, false, false, m, n, k, a.ptr, k, b.ptr, n,
                                0.0f, c.ptr, n));
  }
  PARAMD_CUDA(cudaEventRecord(stop, nullptr));
  PARAMD_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  PARAMD_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 2.0 * m * n * k * iterations / (ms * 1e-3) / 1e12;
}

}  // namespace
}  // namespace paramd

extern "C" const paramd::CudaBackendApi* ParamdCudaBackend() {
  static const paramd::CudaBackendApi api = {
      paramd::kCudaBackendAbi, &paramd::CudaDeviceStatus, &paramd::MakeCudaMlp,
      &paramd::CudaSgemmTflops};
  return &api;
}
