// HostOps: a device backend (worker/model/device_ops.h) that is the CPU
// itself — "device" memory is host memory, copies are memcpy, products are
// OpenBLAS's, and each kernel of worker/model/device_kernels.h runs as a
// loop over its elements. Everything happens at once, in order, so marks
// and Finish have nothing to wait for.
//
// It exists so that the device layers and DeviceSequential — all but the
// CUDA launch and cuBLAS call themselves — are tested against the CPU's
// layers on machines without a GPU (tests/worker/device_layers_test.cc).
#ifndef PARAMD_WORKER_MODEL_HOST_OPS_H_
#define PARAMD_WORKER_MODEL_HOST_OPS_H_

#include <string>

#include "worker/model/blas.h"
#include "worker/model/device_ops.h"

namespace paramd {

class HostOps : public DeviceOps {
 public:
  // `blas` must outlive this.
  explicit HostOps(const Blas* blas) : blas_(blas) {}

  std::string Describe() const override;
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* device) override;
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    return Allocate(bytes);
  }
  void FreeHost(void* host) override { Free(host); }
  absl::Status CopyToDevice(void* device, const void* host,
                            size_t bytes) override;
  absl::Status CopyToHost(void* host, const void* device,
                          size_t bytes) override;
  absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                    const float* a, int lda, const float* b, int ldb,
                    float beta, float* c, int ldc) override;
#define PARAMD_DECLARE_LAUNCH(F) \
  absl::Status Launch(const kernels::F& f, int64_t count) override;
  PARAMD_DEVICE_KERNELS(PARAMD_DECLARE_LAUNCH)
#undef PARAMD_DECLARE_LAUNCH
  absl::Status Mark(int) override { return absl::OkStatus(); }
  absl::Status WaitMark(int) override { return absl::OkStatus(); }
  absl::Status Finish() override { return absl::OkStatus(); }

  // Launches so far (each kernel's count of elements run).
  int64_t launches() const { return launches_; }

 private:
  const Blas* const blas_;
  int64_t launches_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_HOST_OPS_H_
