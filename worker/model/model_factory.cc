#include "worker/model/model_factory.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/layer_shapes.h"
#include "spdlog/spdlog.h"
#include "worker/model/cuda_mlp.h"
#include "worker/model/sequential.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JobConfig& config,
                                                 int max_batch) {
  if (config.model.type == ModelType::kEmbeddingConcat) {
    return absl::InvalidArgumentError(
        "model.type: embedding_concat models are trained by tools/rows_bench, "
        "not by a worker's model");
  }
  if (config.model.type == ModelType::kTensors) {
    return absl::InvalidArgumentError(
        "model.type: tensors models are a framework's (python/paramd), not "
        "a worker's model");
  }
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(config.model);
  if (!graph.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.path, ": ", graph.status().message()));
  }
  const std::string& device = config.worker.device;
  if (device == "cuda" || device == "auto") {
    absl::Status usable = CudaDeviceStatus();
    // The CUDA backend runs the dense/ReLU stack of the width shorthand.
    if (usable.ok() && !graph->dense_stack) {
      usable = absl::UnimplementedError(absl::StrCat(
          "the CUDA backend runs dense/relu stacks only (model.layers as "
          "widths), not ",
          DescribeGraph(*graph)));
    }
    if (usable.ok()) {
      spdlog::info("worker.device {}: using CUDA", device);
      return MakeCudaMlp(config.model.layers, max_batch,
                         config.worker.allow_tf32);
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
