#include "worker/model/host_ops.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace paramd {

std::string HostOps::Describe() const {
  return absl::StrCat("host (the device kernels in loops, ",
                      blas_->description(), ")");
}

absl::StatusOr<void*> HostOps::Allocate(size_t bytes) {
  // 64-byte aligned, as device allocations are at least.
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("HostOps: cannot allocate ", bytes, " bytes"));
  }
  // Poisoned, so that a kernel reading what nothing wrote shows.
  std::memset(p, 0xFF, bytes);
  return p;
}

void HostOps::Free(void* device) { std::free(device); }

absl::Status HostOps::CopyToDevice(void* device, const void* host,
                                   size_t bytes) {
  std::memcpy(device, host, bytes);
  return absl::OkStatus();
}

absl::Status HostOps::CopyToHost(void* host, const void* device, size_t bytes) {
  std::memcpy(host, device, bytes);
  return absl::OkStatus();
}

absl::Status HostOps::Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                           const float* a, int lda, const float* b, int ldb,
                           float beta, float* c, int ldc) {
  blas_->Sgemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  return absl::OkStatus();
}

#define PARAMD_DEFINE_LAUNCH(F)                                      \
  absl::Status HostOps::Launch(const kernels::F& f, int64_t count) { \
    for (int64_t i = 0; i < count; ++i) f(i);                        \
    ++launches_;                                                     \
    return absl::OkStatus();                                         \
  }
PARAMD_DEVICE_KERNELS(PARAMD_DEFINE_LAUNCH)
#undef PARAMD_DEFINE_LAUNCH

}  // namespace paramd
