// worker/model/cuda_backend.h's functions: each loads libparamd_cuda.so once
// (found as common/base/binaries.h finds binaries: beside the program, or in
// worker/ of a Bazel output tree; or where PARAMD_CUDA_PLUGIN says) and calls
// its entry point, or says why there is no backend.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/binaries.h"
#include "worker/model/cuda_backend.h"
#include "worker/model/cuda_backend_api.h"
#include "worker/model/device_sequential.h"

namespace paramd {
namespace {

constexpr char kPlugin[] = "libparamd_cuda.so";

absl::StatusOr<const CudaBackendApi*> Load() {
  // PARAMD_CUDA_PLUGIN names the plugin where the program cannot find it
  // beside itself (e.g. run through a bundled loader, scripts/gpu-bundle.sh).
  const char* named = std::getenv("PARAMD_CUDA_PLUGIN");
  const std::string path = named != nullptr && *named != '\0'
                               ? std::string(named)
                               : FindBinary(kPlugin, "worker", R_OK);
  if (access(path.c_str(), R_OK) != 0) {
    return absl::UnavailableError(
        absl::StrCat("this build has no CUDA backend (no ", kPlugin,
                     " beside the program: built without a CUDA toolkit at "
                     "/usr/local/cuda?)"));
  }
  // Without the driver's library there is no device: say so before
  // loading cuBLAS, whose pages alone would cost a CPU worker ~110 MB of
  // its resident memory.
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
      driver != nullptr) {
    dlclose(driver);
  } else {
    return absl::UnavailableError(absl::StrCat(
        "no CUDA driver (libcuda.so.1 cannot be loaded: ", dlerror(), ")"));
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load the CUDA backend ", path, ": ", dlerror()));
  }
  auto entry = reinterpret_cast<const CudaBackendApi* (*)()>(
      dlsym(lib, "ParamdCudaBackend"));
  const CudaBackendApi* api = entry != nullptr ? entry() : nullptr;
  if (api == nullptr || api->abi != kCudaBackendAbi) {
    return absl::UnavailableError(
        absl::StrCat("the CUDA backend ", path, " is of another paramd build"));
  }
  return api;
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

absl::StatusOr<std::unique_ptr<DeviceOps>> MakeCudaOps(bool allow_tf32,
                                                       DeviceProfile* profile) {
  absl::StatusOr<const CudaBackendApi*> api = Backend();
  if (!api.ok()) return api.status();
  return (*api)->make_ops(allow_tf32, profile);
}

absl::StatusOr<std::unique_ptr<Model>> MakeCudaModel(const LayerGraph& graph,
                                                     int max_batch,
                                                     bool allow_tf32,
                                                     DeviceProfile* profile) {
  absl::StatusOr<std::unique_ptr<DeviceOps>> ops =
      MakeCudaOps(allow_tf32, profile);
  if (!ops.ok()) return ops.status();
  absl::StatusOr<std::unique_ptr<DeviceSequential>> model =
      DeviceSequential::Create(graph, max_batch, *std::move(ops));
  if (!model.ok()) return model.status();
  return std::unique_ptr<Model>(*std::move(model));
}

absl::StatusOr<double> CudaSgemmTflops(int m, int n, int k, bool allow_tf32,
                                       int iterations) {
  absl::StatusOr<const CudaBackendApi*> api = Backend();
  if (!api.ok()) return api.status();
  return (*api)->sgemm_tflops(m, n, k, allow_tf32, iterations);
}

}  // namespace paramd
