// The CUDA MLP against the CPU MLP on the same random inputs: each layer
// shape alone, then the whole MLP's step, relative error <= 1e-5 with TF32
// off. Skipped (tests/cuda_test_main.cc) where no CUDA device exists.
#include "worker/model/cuda_mlp.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "common/model/model_spec.h"
#include "worker/model/blas.h"
#include "worker/model/sequential.h"

namespace paramd {
namespace {

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// One step of both backends on the same random parameters and batch.
void Compare(const std::vector<int>& layers, int batch) {
  ModelConfig mc;
  mc.layers = layers;
  const ModelSpec spec = BuildModelSpec(mc);
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> params(spec.total_elements);
  for (size_t t = 0, off = 0; t < spec.tensors.size(); ++t) {
    InitTensorRange(
        spec.tensors[t], 5, static_cast<int>(t), 0,
        absl::MakeSpan(params).subspan(off, spec.tensors[t].num_elements));
    off += spec.tensors[t].num_elements;
  }
  std::vector<float> x(size_t(batch) * layers[0]);
  for (float& v : x) v = (u(gen) + 1) / 2;
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i)
    y[i] = static_cast<int32_t>(gen() % layers.back());

  auto blas = LoadBlas("auto");
  REQUIRE(blas.ok());
  auto cpu_model = CpuSequential::Mlp(layers, batch, 1, *blas);
  REQUIRE(cpu_model.ok());
  CpuSequential& cpu = **cpu_model;
  auto gpu = MakeCudaMlp(layers, batch, /*allow_tf32=*/false);
  INFO(gpu.status().ToString());
  REQUIRE(gpu.ok());
  // Also the gradient of the input (embedding models need it).
  REQUIRE(cpu.EnableInputGradient().ok());
  REQUIRE((*gpu)->EnableInputGradient().ok());
  std::vector<float> g_cpu(params.size()), g_gpu(params.size());
  auto l_cpu = cpu.ComputeGradients(params, x.data(), y.data(), batch,
                                    absl::MakeSpan(g_cpu));
  auto l_gpu = (*gpu)->ComputeGradients(params, x.data(), y.data(), batch,
                                        absl::MakeSpan(g_gpu));
  REQUIRE(l_cpu.ok());
  INFO(l_gpu.status().ToString());
  REQUIRE(l_gpu.ok());
  CHECK(*l_gpu == Approx(*l_cpu).epsilon(1e-5));
  const double err = RelativeError(g_gpu, g_cpu);
  INFO("gradient relative error " << err);
  CHECK(err <= 1e-5);
  const absl::Span<const float> dx_cpu = cpu.InputGradient();
  const absl::Span<const float> dx_gpu = (*gpu)->InputGradient();
  REQUIRE(dx_gpu.size() == dx_cpu.size());
  const double dx_err =
      RelativeError(std::vector<float>(dx_gpu.begin(), dx_gpu.end()),
                    std::vector<float>(dx_cpu.begin(), dx_cpu.end()));
  INFO("input gradient relative error " << dx_err);
  CHECK(dx_err <= 1e-5);
  auto c_cpu = cpu.CountCorrect(params, x.data(), y.data(), batch);
  auto c_gpu = (*gpu)->CountCorrect(params, x.data(), y.data(), batch);
  REQUIRE(c_gpu.ok());
  CHECK(*c_gpu == *c_cpu);
}

TEST_CASE("each dense layer shape matches the CPU", "[cuda][model]") {
  SECTION("784 -> 256 (fc1 as the output layer)") { Compare({784, 256}, 64); }
  SECTION("256 -> 128") { Compare({256, 128}, 64); }
  SECTION("128 -> 10") { Compare({128, 10}, 64); }
}

TEST_CASE("a whole MLP step matches the CPU", "[cuda][model]") {
  for (int batch : {1, 64, 256, 1024}) {
    INFO("batch " << batch);
    Compare({784, 256, 128, 10}, batch);
  }
}

TEST_CASE("bad inputs are refused on the GPU too", "[cuda][model]") {
  auto gpu = MakeCudaMlp({4, 3}, 2, false);
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
