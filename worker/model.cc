#include "worker/model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/cpu_mlp.h"

namespace paramd {

FlatLayout::FlatLayout(const ModelSpec& spec) {
  for (const TensorSpec& t : spec.tensors) {
    offset.push_back(total);
    total += t.num_elements;
  }
}

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JobConfig& config,
                                                 int max_batch) {
  if (config.model.type != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type: unknown model '", config.model.type, "'"));
  }
  if (config.worker.device == "cpu") {
    absl::StatusOr<const Blas*> blas = LoadBlas(config.worker.blas_core);
    if (!blas.ok()) return blas.status();
    return std::make_unique<CpuMlp>(config.model.layers, max_batch,
                                    config.worker.threads, *blas);
  }
  // The seam for the CUDA backend: it will be chosen here.
  return absl::UnimplementedError(
      absl::StrCat("worker.device: '", config.worker.device,
                   "' is not available in this build"));
}

}  // namespace paramd
