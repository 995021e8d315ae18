#include "worker/model/model_factory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/layer_shapes.h"
#include "spdlog/spdlog.h"
#include "worker/model/cuda_backend.h"
#include "worker/model/sequential.h"

namespace paramd {

absl::Status CheckWorkerModelType(const JobConfig& config) {
  if (config.model.type == ModelType::kTensors) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.path,
        ": model.type tensors: the model is a framework's (e.g. PyTorch "
        "through python/paramd, started by worker.command); paramd-worker "
        "trains mlp and embedding_bag models"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JobConfig& config,
                                                 int max_batch) {
  RETURN_IF_ERROR(CheckWorkerModelType(config));
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(config.model);
  if (!graph.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.path, ": ", graph.status().message()));
  }
  const std::string& device = config.worker.device;
  if (device == "cuda" || device == "auto") {
    absl::Status usable = CudaDeviceStatus();
    if (usable.ok()) {
      absl::StatusOr<std::unique_ptr<Model>> model =
          MakeCudaModel(*graph, max_batch, config.worker.allow_tf32);
      if (model.ok()) {
        spdlog::info("worker.device {}: using {}", device,
                     (*model)->Describe());
        return model;
      }
      // A device that cannot hold the model: auto goes on on the CPU.
      usable = model.status();
    }
    if (device == "cuda") {
      return absl::FailedPreconditionError(absl::StrCat(
          config.path, ": worker.device: cuda, but ", usable.message()));
    }
    spdlog::info("worker.device auto: {}: using CPU",
                 std::string(usable.message()));
  }
  ASSIGN_OR_RETURN(const Blas* blas, LoadBlas(config.worker.blas_core));
  return std::make_unique<CpuSequential>(*std::move(graph), max_batch,
                                         config.worker.threads, blas);
}

}  // namespace paramd
