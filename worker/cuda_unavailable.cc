// The CUDA backend of a build made without a CUDA toolkit.
#include "absl/status/status.h"
#include "worker/cuda_mlp.h"

namespace paramd {
namespace {

absl::Status LeftOut() {
  return absl::UnavailableError(
      "this build has no CUDA backend (no CUDA toolkit at /usr/local/cuda "
      "when it was built)");
}

}  // namespace

absl::Status CudaDeviceStatus() { return LeftOut(); }

absl::StatusOr<std::unique_ptr<Model>> MakeCudaMlp(const std::vector<int>&,
                                                   int, bool) {
  return LeftOut();
}

absl::StatusOr<double> CudaSgemmTflops(int, int, int, bool, int) {
  return LeftOut();
}

}  // namespace paramd
