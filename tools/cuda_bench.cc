// paramd-cuda-bench: a worker's compute step on the CPU and on the GPU.
//
// Prints samples/s of the MLP 784-256-128-10's forward+backward per batch
// size on both backends, and cuBLAS SGEMM TFLOP/s for the MLP's forward
// shapes at each batch against a large square SGEMM on the same device
// (the reference for "peak"). Without a CUDA device it prints the CPU side
// and says why the GPU side is missing.
//
//   bazel run //tools:cuda_bench -- [--seconds S] [--allow_tf32]
#include <cstdio>
#include <random>

#include "common/base/flags.h"
#include "common/base/process_setup.h"
#include "common/model/model_spec.h"
#include "tools/bench/bench_timing.h"
#include "worker/model/blas.h"
#include "worker/model/cuda_mlp.h"
#include "worker/model/sequential.h"

namespace paramd {
namespace {

// MLP 784-256-128-10 forward+backward per batch on the CPU and, when
// `gpu` is OK, on the GPU.
void MlpSection(const Blas* blas, const absl::Status& gpu, bool tf32,
                double seconds) {
  const std::vector<int> layers = {784, 256, 128, 10};
  ModelConfig mc;
  mc.layers = layers;
  const ModelSpec spec = BuildModelSpec(mc);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> params(spec.total_elements), grads(spec.total_elements);
  for (float& p : params) p = u(gen) * 0.05f;
  std::printf("MLP 784-256-128-10 forward+backward (TF32 %s)\n",
              tf32 ? "on" : "off");
  if (!gpu.ok()) std::printf("GPU: %s\n", std::string(gpu.message()).c_str());
  std::printf("%-7s %14s %14s %9s\n", "batch", "cpu samples/s", "gpu samples/s",
              "gpu/cpu");
  for (int batch : {64, 256, 1024}) {
    std::vector<float> x(size_t(batch) * 784);
    std::vector<int32_t> y(batch);
    for (float& v : x) v = (u(gen) + 1) / 2;
    for (int i = 0; i < batch; ++i) y[i] = i % 10;
    auto step = [&](Model& model) {
      return SecondsPerCall(seconds, [&] {
        return model
            .ComputeGradients(params, x.data(), y.data(), batch,
                              absl::MakeSpan(grads))
            .ok();
      });
    };
    absl::StatusOr<std::unique_ptr<CpuSequential>> cpu_model =
        CpuSequential::Mlp(layers, batch, 1, blas);
    if (!cpu_model.ok()) {
      std::printf("CPU: %s\n",
                  std::string(cpu_model.status().message()).c_str());
      return;
    }
    CpuSequential& cpu = **cpu_model;
    const double t_cpu = step(cpu);
    double t_gpu = -1;
    if (gpu.ok()) {
      auto model = MakeCudaMlp(layers, batch, tf32);
      if (!model.ok()) {
        std::printf("GPU: %s\n", std::string(model.status().message()).c_str());
      } else {
        t_gpu = step(**model);
      }
    }
    if (t_gpu > 0) {
      std::printf("%-7d %14.0f %14.0f %8.1fx\n", batch, batch / t_cpu,
                  batch / t_gpu, t_cpu / t_gpu);
    } else {
      std::printf("%-7d %14.0f %14s %9s\n", batch, batch / t_cpu, "-", "-");
    }
  }
}

// cuBLAS SGEMM for the MLP's forward shapes against 8192^3; 1 on failure.
int SgemmSection(bool tf32) {
  auto peak = CudaSgemmTflops(8192, 8192, 8192, tf32, 20);
  if (!peak.ok()) {
    std::printf("GPU: %s\n", std::string(peak.status().message()).c_str());
    return 1;
  }
  std::printf("\ncuBLAS SGEMM, TF32 %s; reference 8192^3: %.1f TFLOP/s\n",
              tf32 ? "on" : "off", *peak);
  std::printf("%-28s %10s %12s\n", "shape (M x N x K)", "TFLOP/s", "of 8192^3");
  for (int batch : {64, 256, 1024}) {
    for (auto [n, k] : {std::pair{256, 784}, std::pair{128, 256}}) {
      auto t = CudaSgemmTflops(batch, n, k, tf32, 200);
      if (!t.ok()) continue;
      std::printf("%5d x %4d x %4d %15s %10.2f %11.1f%%\n", batch, n, k, "", *t,
                  100.0 * *t / *peak);
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  SetUpProcess();
  auto flags = ParseFlags(argc, argv, {"seconds"}, {"allow_tf32"});
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  const double seconds = std::stod(flags->Get("seconds", "1"));
  const bool tf32 = flags->Has("allow_tf32");
  auto blas = LoadBlas("auto");
  if (!blas.ok()) {
    std::fprintf(stderr, "%s\n", std::string(blas.status().message()).c_str());
    return 1;
  }
  const absl::Status gpu = CudaDeviceStatus();
  MlpSection(*blas, gpu, tf32, seconds);
  if (!gpu.ok()) return 0;
  return SgemmSection(tf32);
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
