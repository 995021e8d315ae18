#include "worker/model/cuda_ops.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "worker/model/cuda_launch.h"

namespace paramd {
namespace {

absl::Status CudaCheck(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorName(e), ": ",
                                          cudaGetErrorString(e)));
}

absl::Status BlasCheck(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, ": cuBLAS status ", static_cast<int>(s)));
}

// Returns from the calling function when a CUDA or cuBLAS call fails, with
// a status naming the call.
#define PARAMD_CUDA(call)                      \
  do {                                         \
    RETURN_IF_ERROR(CudaCheck((call), #call)); \
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

class CudaOps : public DeviceOps {
 public:
  CudaOps(bool allow_tf32, DeviceProfile* profile)
      : allow_tf32_(allow_tf32), profile_(profile) {}

  ~CudaOps() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : marks_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
    for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
    for (const TimedOp& t : timed_) {
      cudaEventDestroy(t.start);
      cudaEventDestroy(t.stop);
    }
    if (handle_ != nullptr) cublasDestroy(handle_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    PARAMD_CUDA(cudaSetDevice(0));
    cudaDeviceProp prop;
    PARAMD_CUDA(cudaGetDeviceProperties(&prop, 0));
    device_name_ = prop.name;
    PARAMD_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    PARAMD_CUBLAS(cublasCreate(&handle_));
    PARAMD_CUBLAS(cublasSetStream(handle_, stream_));
    PARAMD_CUBLAS(cublasSetMathMode(handle_, allow_tf32_
                                                 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                 : CUBLAS_PEDANTIC_MATH));
    return absl::OkStatus();
  }

  std::string Describe() const override {
    return absl::StrCat("cuda (", device_name_, ", cuBLAS SGEMM, TF32 ",
                        allow_tf32_ ? "allowed" : "off", ")");
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    PARAMD_CUDA(cudaMalloc(&p, bytes));
    return p;
  }
  void Free(void* device) override { cudaFree(device); }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    void* p = nullptr;
    PARAMD_CUDA(cudaMallocHost(&p, bytes));
    return p;
  }
  void FreeHost(void* host) override { cudaFreeHost(host); }

  absl::Status CopyToDevice(void* device, const void* host,
                            size_t bytes) override {
    return Timed(kCopy, [&] {
      return CudaCheck(
          cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (to the device)");
    });
  }
  absl::Status CopyToHost(void* host, const void* device,
                          size_t bytes) override {
    return Timed(kCopy, [&] {
      return CudaCheck(
          cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (to the host)");
    });
  }

  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                    const float* a, int lda, const float* b, int ldb,
                    float beta, float* c, int ldc) override {
    return Timed(kGemm, [&] {
      return BlasCheck(RowMajorSgemm(handle_, trans_a, trans_b, m, n, k, a, lda,
                                     b, ldb, beta, c, ldc),
                       "cublasSgemm");
    });
  }

#define PARAMD_DEFINE_LAUNCH(F)                                           \
  absl::Status Launch(const kernels::F& f, int64_t count) override {      \
    return Timed(kKernel, [&] {                                           \
      return CudaCheck(                                                   \
          static_cast<cudaError_t>(cuda::Launch(f, count, stream_)), #F); \
    });                                                                   \
  }
  PARAMD_DEVICE_KERNELS(PARAMD_DEFINE_LAUNCH)
#undef PARAMD_DEFINE_LAUNCH

  absl::Status Mark(int slot) override {
    if (slot < 0) return absl::InvalidArgumentError("Mark: a negative slot");
    if (static_cast<size_t>(slot) >= marks_.size()) marks_.resize(slot + 1);
    if (marks_[slot] == nullptr) {
      PARAMD_CUDA(
          cudaEventCreateWithFlags(&marks_[slot], cudaEventDisableTiming));
    }
    PARAMD_CUDA(cudaEventRecord(marks_[slot], stream_));
    return absl::OkStatus();
  }

  absl::Status WaitMark(int slot) override {
    if (slot < 0 || static_cast<size_t>(slot) >= marks_.size() ||
        marks_[slot] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("WaitMark: slot ", slot, " was never marked"));
    }
    PARAMD_CUDA(cudaEventSynchronize(marks_[slot]));
    return absl::OkStatus();
  }

  absl::Status Finish() override {
    PARAMD_CUDA(cudaStreamSynchronize(stream_));
    return Harvest();
  }

  void Profile(DeviceProfile* profile) override {
    Finish().IgnoreError();
    profile_ = profile;
  }

 private:
  enum Category { kGemm, kKernel, kCopy };
  struct TimedOp {
    Category what;
    cudaEvent_t start, stop;
  };

  // Runs `op`, between two timing events while profiling.
  template <typename Op>
  absl::Status Timed(Category what, Op&& op) {
    if (profile_ == nullptr) return op();
    cudaEvent_t start = nullptr, stop = nullptr;
    RETURN_IF_ERROR(Event(&start));
    RETURN_IF_ERROR(Event(&stop));
    PARAMD_CUDA(cudaEventRecord(start, stream_));
    RETURN_IF_ERROR(op());
    PARAMD_CUDA(cudaEventRecord(stop, stream_));
    timed_.push_back({what, start, stop});
    return absl::OkStatus();
  }

  absl::Status Event(cudaEvent_t* e) {
    if (!spare_events_.empty()) {
      *e = spare_events_.back();
      spare_events_.pop_back();
      return absl::OkStatus();
    }
    PARAMD_CUDA(cudaEventCreate(e));
    return absl::OkStatus();
  }

  // After the stream is idle: the timed operations' times into profile_.
  absl::Status Harvest() {
    for (const TimedOp& t : timed_) {
      float ms = 0;
      PARAMD_CUDA(cudaEventElapsedTime(&ms, t.start, t.stop));
      if (profile_ != nullptr) {
        switch (t.what) {
          case kGemm:
            profile_->gemm_ms += ms;
            ++profile_->gemms;
            break;
          case kKernel:
            profile_->kernel_ms += ms;
            ++profile_->kernels;
            break;
          case kCopy:
            profile_->copy_ms += ms;
            ++profile_->copies;
            break;
        }
      }
      spare_events_.push_back(t.start);
      spare_events_.push_back(t.stop);
    }
    timed_.clear();
    return absl::OkStatus();
  }

  const bool allow_tf32_;
  DeviceProfile* profile_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  std::vector<cudaEvent_t> marks_;
  std::vector<TimedOp> timed_;
  std::vector<cudaEvent_t> spare_events_;
};

}  // namespace

absl::Status CudaDevicePresent() {
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

absl::StatusOr<std::unique_ptr<DeviceOps>> NewCudaOps(bool allow_tf32,
                                                      DeviceProfile* profile) {
  RETURN_IF_ERROR(CudaDevicePresent());
  auto ops = std::make_unique<CudaOps>(allow_tf32, profile);
  RETURN_IF_ERROR(ops->Init());
  return std::unique_ptr<DeviceOps>(std::move(ops));
}

absl::StatusOr<double> CudaSgemmThroughput(int m, int n, int k, bool allow_tf32,
                                           int iterations) {
  RETURN_IF_ERROR(CudaDevicePresent());
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceOps> ops,
                   NewCudaOps(allow_tf32, nullptr));
  ASSIGN_OR_RETURN(DeviceArray<float> a,
                   DeviceArray<float>::Make(ops.get(), size_t(m) * k));
  ASSIGN_OR_RETURN(DeviceArray<float> b,
                   DeviceArray<float>::Make(ops.get(), size_t(k) * n));
  ASSIGN_OR_RETURN(DeviceArray<float> c,
                   DeviceArray<float>::Make(ops.get(), size_t(m) * n));
  PARAMD_CUDA(cudaMemset(a.get(), 0, size_t(m) * k * sizeof(float)));
  PARAMD_CUDA(cudaMemset(b.get(), 0, size_t(k) * n * sizeof(float)));
  auto gemm = [&] {
    return ops->Gemm(false, false, m, n, k, a.get(), k, b.get(), n, 0.0f,
                     c.get(), n);
  };
  RETURN_IF_ERROR(gemm());  // Warm-up.
  RETURN_IF_ERROR(ops->Finish());
  DeviceProfile profile;
  ops->Profile(&profile);
  for (int i = 0; i < iterations; ++i) RETURN_IF_ERROR(gemm());
  RETURN_IF_ERROR(ops->Finish());
  ops->Profile(nullptr);
  if (profile.gemm_ms <= 0) return absl::InternalError("no GEMM time measured");
  return 2.0 * m * n * k * iterations / (profile.gemm_ms * 1e-3) / 1e12;
}

}  // namespace paramd
