// Blas: the CPU's matrix product, from OpenBLAS loaded at run time.
//
// OpenBLAS picks its kernel once, when the library loads, from the CPU id —
// and Debian's 0.3.21 does not recognise some current (e.g. virtualised)
// Xeons, falling back to its SSE3 "Prescott" kernel, 4-6x slower than the
// AVX-512 one on the same machine. So paramd loads OpenBLAS itself (dlopen)
// after choosing the kernel:
//   "auto"     SkylakeX when the CPU has AVX-512 F/BW/DQ/VL, Haswell when it
//              has AVX2 and FMA, else OpenBLAS's own choice;
//   "library"  always OpenBLAS's own choice;
//   a name     that OpenBLAS kernel (e.g. "Haswell").
// An OPENBLAS_CORETYPE already set in the environment wins over all three:
// machines set it where a kernel is known to misbehave.
//
// The library is loaded once per process; the first LoadBlas decides.
// Thread-safe.
#ifndef PARAMD_WORKER_MODEL_BLAS_H_
#define PARAMD_WORKER_MODEL_BLAS_H_

#include <string>

#include "absl/status/statusor.h"

namespace paramd {

class Blas {
 public:
  // Row-major C = alpha * op(A) * op(B) + beta * C, as cblas_sgemm.
  void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
             const float* a, int lda, const float* b, int ldb, float beta,
             float* c, int ldc) const;
  void SetThreads(int threads) const;
  // e.g. "OpenBLAS 0.3.21 ... SkylakeX (chosen: AVX-512 present)".
  const std::string& description() const { return description_; }

 private:
  friend absl::StatusOr<const Blas*> LoadBlas(const std::string& core);
  using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*,
                           int, const float*, int, float, float*, int);
  SgemmFn sgemm_ = nullptr;
  void (*set_threads_)(int) = nullptr;
  std::string description_;
};

// Loads OpenBLAS (once) with the kernel `core` asks for; see above.
absl::StatusOr<const Blas*> LoadBlas(const std::string& core);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_BLAS_H_
