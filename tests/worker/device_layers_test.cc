// The device layers and DeviceSequential — what the CUDA backend runs, but
// for its kernel launches and cuBLAS — on the host backend (the same kernel
// functors in loops, OpenBLAS for the products) against the CPU's layers:
// each layer alone over strides, paddings, odd and non-square sizes and
// batches of 1; whole steps of the main job's MLP and of a CNN with every
// layer kind, plain and overlapped; the refusals. Runs everywhere: the
// index arithmetic every kernel does is checked here, not only on a GPU.
#include <catch2/catch.hpp>

#include "tests/device_compare.h"
#include "tests/test_blas.h"
#include "worker/model/device_sequential.h"
#include "worker/model/host_ops.h"

namespace paramd {
namespace {

using testing::TheBlas;

absl::StatusOr<std::unique_ptr<DeviceOps>> MakeHostOps() {
  return std::unique_ptr<DeviceOps>(std::make_unique<HostOps>(TheBlas()));
}

TEST_CASE("each device layer matches the CPU's on the host backend",
          "[model][layers][device]") {
  for (const testing::LayerCase& c : testing::DeviceLayerCases()) {
    SECTION(c.what) { testing::CompareEachLayer(c, MakeHostOps, 1e-5); }
  }
}

TEST_CASE("a whole device step matches the CPU's on the host backend",
          "[model][layers][device]") {
  SECTION("the main job's MLP, batch 64") {
    testing::CompareWholeStep(testing::MainMlp(), 64, MakeHostOps, 1e-5);
  }
  SECTION("the MLP, batch 1") {
    testing::CompareWholeStep(testing::MainMlp(), 1, MakeHostOps, 1e-5);
  }
  SECTION("a CNN with conv, batch norm, both poolings and dropout") {
    testing::CompareWholeStep(testing::SmallCnn(), 5, MakeHostOps, 1e-5);
  }
  for (const testing::LayerCase& c : testing::DeviceLayerCases()) {
    SECTION(c.what) {
      testing::CompareWholeStep(c.model, c.batch, MakeHostOps, 1e-5);
    }
  }
}

TEST_CASE("the device model refuses what the CPU's refuses",
          "[model][layers][device]") {
  absl::StatusOr<LayerGraph> g = InferLayerGraph(testing::MainMlp());
  REQUIRE(g.ok());
  auto model = DeviceSequential::Create(*g, 2, *MakeHostOps());
  REQUIRE(model.ok());
  const int64_t total = BuildModelSpec(testing::MainMlp()).total_elements;
  std::vector<float> params(total, 0.01f), grads(total), x(3 * 784, 0.5f);
  std::vector<int32_t> y = {0, 10, 1};
  absl::StatusOr<double> s = (*model)->ComputeGradients(
      params, x.data(), y.data(), 2, absl::MakeSpan(grads));
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() == "ComputeGradients: label 10 outside [0, 10)");
  s = (*model)->ComputeGradients(params, x.data(), y.data(), 3,
                                 absl::MakeSpan(grads));
  CHECK(s.status().message() == "ComputeGradients: batch of 3 outside [1, 2]");
  std::vector<float> short_params(total - 1);
  s = (*model)->ComputeGradients(short_params, x.data(), y.data(), 1,
                                 absl::MakeSpan(grads));
  CHECK(absl::IsInvalidArgument(s.status()));
  CHECK(absl::IsInvalidArgument(
      (*model)->CountCorrect(short_params, x.data(), y.data(), 1).status()));
  CHECK(absl::IsInvalidArgument(
      DeviceSequential::Create(*g, 0, *MakeHostOps()).status()));
}

}  // namespace
}  // namespace paramd
