// The CUDA backend against the CPU: each layer alone (relative error ≤
// 1e-4, TF32 off) over every layer kind, strides, paddings, odd sizes and
// batches of 1; whole steps of the main job's MLP (≤ 1e-5, as before layer
// graphs ran on the GPU) and of a CNN, plain and overlapped; the shipped
// CNN; the refusals. Skipped (tests/cuda_test_main.cc) where no CUDA device
// exists. The same checks run on the host backend everywhere
// (tests/worker/device_layers_test.cc).
#include <catch2/catch.hpp>

#include "common/config/job_file.h"
#include "tests/device_compare.h"
#include "worker/model/cuda_backend.h"

namespace paramd {
namespace {

absl::StatusOr<std::unique_ptr<DeviceOps>> Cuda() {
  return MakeCudaOps(/*allow_tf32=*/false);
}

TEST_CASE("each CUDA layer matches the CPU's", "[cuda][model][layers]") {
  for (const testing::LayerCase& c : testing::DeviceLayerCases()) {
    SECTION(c.what) { testing::CompareEachLayer(c, Cuda, 1e-4); }
  }
}

TEST_CASE("a whole CUDA step matches the CPU's", "[cuda][model]") {
  for (int batch : {1, 64, 256, 1024}) {
    SECTION("the main job's MLP, batch " + std::to_string(batch)) {
      testing::CompareWholeStep(testing::MainMlp(), batch, Cuda, 1e-5);
    }
  }
  SECTION("a CNN with conv, batch norm, both poolings and dropout") {
    testing::CompareWholeStep(testing::SmallCnn(), 16, Cuda, 1e-4);
  }
  SECTION("the shipped CNN job's graph, batch 64") {
    // From the tree's root, or the GPU bundle's (which ships the file).
    // Only the model is used: the GPU bundle runs this without the dataset.
    JobFileChecks model_only;
    model_only.data_files_readable = false;
    absl::StatusOr<JobConfig> job =
        LoadJobConfig("configs/fashion_mnist_cnn.yaml", model_only);
    INFO(job.status().ToString());
    REQUIRE(job.ok());
    testing::CompareWholeStep(job->model, 64, Cuda, 1e-4);
  }
  for (const testing::LayerCase& c : testing::DeviceLayerCases()) {
    SECTION(c.what) { testing::CompareWholeStep(c.model, c.batch, Cuda, 1e-4); }
  }
}

TEST_CASE("bad inputs are refused on the GPU too", "[cuda][model]") {
  ModelConfig mc;
  mc.layers = {4, 3};
  absl::StatusOr<LayerGraph> g = InferLayerGraph(mc);
  REQUIRE(g.ok());
  auto gpu = MakeCudaModel(*g, 2, false);
  INFO(gpu.status().ToString());
  REQUIRE(gpu.ok());
  std::vector<float> params(4 * 3 + 3), grads(params.size()), x(8, 0.5f);
  std::vector<int32_t> y = {0, 7};
  auto s = (*gpu)->ComputeGradients(params, x.data(), y.data(), 2,
                                    absl::MakeSpan(grads));
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.status().message()).find("label 7") != std::string::npos);
  CHECK_FALSE((*gpu)
                  ->ComputeGradients(params, x.data(), y.data(), 3,
                                     absl::MakeSpan(grads))
                  .ok());
}

}  // namespace
}  // namespace paramd
