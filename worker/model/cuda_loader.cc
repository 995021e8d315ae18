// worker/model/cuda_mlp.h's functions: each loads libparamd_cuda.so once (from
// the program's own folder, or from worker/ beside it in a Bazel output
// tree) and calls its entry point, or says why there is no backend.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/model/cuda_backend_api.h"
#include "worker/model/cuda_mlp.h"

namespace paramd {
namespace {

constexpr char kPlugin[] = "libparamd_cuda.so";

// The folder of the running program.
std::string ProgramDir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  const std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

absl::StatusOr<const CudaBackendApi*> Load() {
  const std::string dir = ProgramDir();
  std::string tried;
  for (const std::string& path : {absl::StrCat(dir, "/", kPlugin),
                                  absl::StrCat(dir, "/../worker/", kPlugin)}) {
    if (access(path.c_str(), F_OK) != 0) continue;
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot load the CUDA backend ", path, ": ", dlerror()));
    }
    auto entry = reinterpret_cast<const CudaBackendApi* (*)()>(
        dlsym(lib, "ParamdCudaBackend"));
    const CudaBackendApi* api = entry != nullptr ? entry() : nullptr;
    if (api == nullptr || api->abi != kCudaBackendAbi) {
      return absl::UnavailableError(absl::StrCat(
          "the CUDA backend ", path, " is of another paramd build"));
    }
    return api;
  }
  return absl::UnavailableError(
      absl::StrCat("this build has no CUDA backend (no ", kPlugin,
                   " beside the program: "
                   "built without a CUDA toolkit at /usr/local/cuda?)"));
}

absl::StatusOr<const CudaBackendApi*> Backend() {
  static std::once_flag once;
  static absl::StatusOr<const CudaBackendApi*>* loaded = nullptr;
  std::call_once(
      once, [] { loaded = new absl::StatusOr<const CudaBackendApi*>(Load()); });
  return *loaded;
}

}  // namespace

absl::Status CudaDeviceStatus() {
  absl::StatusOr<const CudaBackendApi*> api = Backend();
  if (!api.ok()) return api.status();
  return (*api)->device_status();
}

absl::StatusOr<std::unique_ptr<Model>> MakeCudaMlp(
    const std::vector<int>& layers, int max_batch, bool allow_tf32) {
  absl::StatusOr<const CudaBackendApi*> api = Backend();
  if (!api.ok()) return api.status();
  return (*api)->make_mlp(layers, max_batch, allow_tf32);
}

absl::StatusOr<double> CudaSgemmTflops(int m, int n, int k, bool allow_tf32,
                                       int iterations) {
  absl::StatusOr<const CudaBackendApi*> api = Backend();
  if (!api.ok()) return api.status();
  return (*api)->sgemm_tflops(m, n, k, allow_tf32, iterations);
}

}  // namespace paramd
