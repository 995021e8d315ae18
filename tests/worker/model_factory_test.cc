// worker.device: auto falls back to the CPU where no CUDA device can be
// used; cuda there is a clear error naming the field and the reason; with a
// device, both give the CUDA backend, for the MLP and for a typed graph.
#include "worker/model/model_factory.h"

#include <catch2/catch.hpp>

#include "tests/test_files.h"
#include "worker/model/cuda_backend.h"

namespace paramd {
namespace {

JobConfig WithDevice(const std::string& device) {
  testing::JobOptions o;
  JobConfig c = testing::MakeJob(o, testing::NewTempDir());
  c.worker.device = device;
  return c;
}

TEST_CASE("device selection", "[model][device]") {
  const bool have_gpu = CudaDeviceStatus().ok();
  auto cpu = MakeModel(WithDevice("cpu"), 64);
  REQUIRE(cpu.ok());
  CHECK((*cpu)->Describe().rfind("cpu", 0) == 0);

  auto automatic = MakeModel(WithDevice("auto"), 64);
  INFO(automatic.status().ToString());
  REQUIRE(automatic.ok());
  CHECK((*automatic)->Describe().rfind(have_gpu ? "cuda" : "cpu", 0) == 0);

  auto cuda = MakeModel(WithDevice("cuda"), 64);
  if (have_gpu) {
    REQUIRE(cuda.ok());
    CHECK((*cuda)->Describe().rfind("cuda", 0) == 0);
  } else {
    REQUIRE_FALSE(cuda.ok());
    CHECK(absl::IsFailedPrecondition(cuda.status()));
    const std::string message(cuda.status().message());
    CHECK(message.find("worker.device: cuda, but ") != std::string::npos);
    CHECK(message.find(std::string(CudaDeviceStatus().message())) !=
          std::string::npos);
  }
}

TEST_CASE("a typed layer graph runs where the device says", "[model][device]") {
  JobConfig c = WithDevice("auto");
  c.model.layers.clear();
  c.model.input = InputConfig{1, 28, 28, true};
  LayerConfig conv;
  conv.kind = LayerKind::kConv2d;
  conv.out = 2;
  conv.kernel = 3;
  LayerConfig flatten;
  flatten.kind = LayerKind::kFlatten;
  LayerConfig dense;
  dense.out = 10;
  c.model.graph = {conv, flatten, dense};
  const bool have_gpu = CudaDeviceStatus().ok();
  auto automatic = MakeModel(c, 64);
  INFO(automatic.status().ToString());
  REQUIRE(automatic.ok());
  CHECK((*automatic)->Describe().rfind(have_gpu ? "cuda" : "cpu", 0) == 0);
  c.worker.device = "cuda";
  auto cuda = MakeModel(c, 64);
  if (have_gpu) {
    REQUIRE(cuda.ok());
    CHECK((*cuda)->Describe().rfind("cuda", 0) == 0);
  } else {
    REQUIRE_FALSE(cuda.ok());
    CHECK(absl::IsFailedPrecondition(cuda.status()));
    CHECK_THAT(std::string(cuda.status().message()),
               Catch::Contains(std::string(CudaDeviceStatus().message())));
  }
}

}  // namespace
}  // namespace paramd
