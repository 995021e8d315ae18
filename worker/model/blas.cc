#include "worker/model/blas.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

// CBLAS's enum values (cblas.h), fixed by the standard interface.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

constexpr const char* kLibraries[] = {"libopenblas.so.0", "libopenblas.so"};

// The kernel "auto" picks for this CPU, and why; empty: OpenBLAS's own.
std::pair<std::string, std::string> AutoCore() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return {"SkylakeX", "the CPU has AVX-512"};
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return {"Haswell", "the CPU has AVX2 and FMA"};
  }
  return {"", "no AVX2 or AVX-512: OpenBLAS's own choice"};
}

}  // namespace

void Blas::Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta,
                 float* c, int ldc) const {
  sgemm_(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, m,
         n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Blas::SetThreads(int threads) const { set_threads_(threads); }

absl::StatusOr<const Blas*> LoadBlas(const std::string& core) {
  static std::once_flag once;
  static absl::StatusOr<const Blas*>* loaded = nullptr;
  std::call_once(once, [&core] {
    std::string why;
    bool set_here = false;
    if (const char* preset = getenv("OPENBLAS_CORETYPE"); preset != nullptr) {
      why =
          absl::StrCat("OPENBLAS_CORETYPE=", preset, " set by the environment");
    } else if (core == "auto") {
      auto [name, reason] = AutoCore();
      why = reason;
      if (!name.empty()) {
        setenv("OPENBLAS_CORETYPE", name.c_str(), 1);
        set_here = true;
      }
    } else if (core == "library") {
      why = "OpenBLAS's own choice";
    } else {
      why = "worker.blas_core";
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      set_here = true;
    }
    void* lib = nullptr;
    for (const char* name : kLibraries) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    // OpenBLAS read it while loading; child processes must not inherit it
    // as if the machine had set it.
    if (set_here) unsetenv("OPENBLAS_CORETYPE");
    if (lib == nullptr) {
      loaded = new absl::StatusOr<const Blas*>(absl::FailedPreconditionError(
          absl::StrCat("cannot load OpenBLAS (", dlerror(),
                       "); install libopenblas0-pthread")));
      return;
    }
    auto* blas = new Blas;
    blas->sgemm_ = reinterpret_cast<Blas::SgemmFn>(dlsym(lib, "cblas_sgemm"));
    blas->set_threads_ =
        reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"));
    auto config =
        reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_config"));
    if (blas->sgemm_ == nullptr || blas->set_threads_ == nullptr ||
        config == nullptr) {
      loaded = new absl::StatusOr<const Blas*>(absl::FailedPreconditionError(
          "the loaded OpenBLAS lacks cblas_sgemm or openblas_set_num_threads"));
      return;
    }
    blas->description_ = absl::StrCat(config(), " (", why, ")");
    loaded = new absl::StatusOr<const Blas*>(blas);
  });
  return *loaded;
}

}  // namespace paramd
