// paramd-cuda-bench: a worker's compute step on the CPU and on the GPU.
//
// Prints samples/s of a model's forward+backward per batch size on both
// backends (the CPU on one thread, as a worker runs), and for the GPU where
// its device time goes — cuBLAS products, paramd's kernels, copies to and
// from the host — against the step's wall time; then cuBLAS SGEMM TFLOP/s
// for the main MLP's forward shapes against a large square SGEMM (the
// reference for "peak"). The model is the main job's MLP 784-256-128-10,
// or with --job that job's model (e.g. the CNN) at half, once and 4× its
// batch. Without a CUDA device it prints the CPU side and says why the GPU
// side is missing.
//
//   bazel run //tools:cuda_bench -- [--seconds S] [--allow_tf32] [--job J.yaml]
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>

#include "common/base/flags.h"
#include "common/base/process_setup.h"
#include "common/config/job_file.h"
#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "tools/bench/bench_timing.h"
#include "worker/model/blas.h"
#include "worker/model/cuda_backend.h"
#include "worker/model/sequential.h"

namespace paramd {
namespace {

// Seconds per `step` of a CUDA model of `graph` (-1 when none can be
// made); then where the device time goes, over up to 20 calls of
// `compute` on a model of its own that times every operation (events
// around each: slower, so not the figure returned), into `profile` and
// `profiled`.
double TimeGpu(const LayerGraph& graph, int batch, bool tf32,
               const std::function<double(Model&)>& step,
               const std::function<bool(Model&)>& compute,
               DeviceProfile* profile, int64_t* profiled) {
  absl::StatusOr<std::unique_ptr<Model>> model =
      MakeCudaModel(graph, batch, tf32);
  if (!model.ok()) {
    std::printf("GPU: %s\n", std::string(model.status().message()).c_str());
    return -1;
  }
  const double t_gpu = step(**model);
  absl::StatusOr<std::unique_ptr<Model>> timed =
      MakeCudaModel(graph, batch, tf32, profile);
  if (timed.ok()) {
    for (; *profiled < 20 && compute(**timed); ++*profiled) {
    }
  }
  return t_gpu;
}

// forward+backward per batch on the CPU and, when `gpu` is OK, on the GPU,
// with the GPU's device time by kind; 1 when the model cannot be timed.
int ModelSection(const ModelConfig& mc, const std::vector<int>& batches,
                 const Blas* blas, const absl::Status& gpu, bool tf32,
                 double seconds) {
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(mc);
  if (!graph.ok()) {
    std::printf("model: %s\n", std::string(graph.status().message()).c_str());
    return 1;
  }
  const ModelSpec spec = BuildModelSpec(mc);
  std::vector<float> params(spec.total_elements), grads(spec.total_elements);
  const FlatLayout layout(spec);
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    InitTensorRange(spec.tensors[t], 1, static_cast<int>(t), 0,
                    absl::MakeSpan(params).subspan(
                        layout.offset[t], spec.tensors[t].num_elements));
  }
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(0, 1);
  std::printf("%s forward+backward, %lld parameters (TF32 %s)\n",
              DescribeGraph(*graph).c_str(),
              static_cast<long long>(spec.total_elements), tf32 ? "on" : "off");
  if (!gpu.ok()) std::printf("GPU: %s\n", std::string(gpu.message()).c_str());
  std::printf("%-7s %14s %14s %9s   %s\n", "batch", "cpu samples/s",
              "gpu samples/s", "gpu/cpu",
              "gpu device time per step: cuBLAS / kernels / copies (of wall)");
  for (int batch : batches) {
    std::vector<float> x(size_t(batch) * graph->input.size());
    std::vector<int32_t> y(batch);
    for (float& v : x) v = u(gen);
    for (int i = 0; i < batch; ++i) y[i] = i % graph->classes();
    const std::function<bool(Model&)> compute = [&](Model& model) {
      return model
          .ComputeGradients(params, x.data(), y.data(), batch,
                            absl::MakeSpan(grads))
          .ok();
    };
    const std::function<double(Model&)> step = [&](Model& model) {
      model.SetStepSeed(3);
      return SecondsPerCall(seconds, [&] { return compute(model); });
    };
    CpuSequential cpu(*graph, batch, 1, blas);
    const double t_cpu = step(cpu);
    DeviceProfile profile;
    int64_t profiled_steps = 0;
    const double t_gpu = gpu.ok() ? TimeGpu(*graph, batch, tf32, step, compute,
                                            &profile, &profiled_steps)
                                  : -1;
    if (t_gpu > 0) {
      const double n = std::max<int64_t>(profiled_steps, 1);
      const double wall_ms = t_gpu * 1e3;
      std::printf(
          "%-7d %14.0f %14.0f %8.1fx   %.3f / %.3f / %.3f ms (%.0f%% / %.0f%% "
          "/ %.0f%% of %.3f ms)\n",
          batch, batch / t_cpu, batch / t_gpu, t_cpu / t_gpu,
          profile.gemm_ms / n, profile.kernel_ms / n, profile.copy_ms / n,
          100 * profile.gemm_ms / n / wall_ms,
          100 * profile.kernel_ms / n / wall_ms,
          100 * profile.copy_ms / n / wall_ms, wall_ms);
    } else if (t_cpu > 0) {
      std::printf("%-7d %14.0f %14s %9s\n", batch, batch / t_cpu, "-", "-");
    } else {
      std::printf("%-7d CPU step failed\n", batch);
      return 1;
    }
  }
  return 0;
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
  auto flags = ParseFlags(argc, argv, {"seconds", "job"}, {"allow_tf32"});
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
  const std::string job = flags->Get("job", "");
  if (!job.empty()) {
    // Only the job's model is used, so its data need not be here (the GPU
    // bundle's machine has no dataset).
    JobFileChecks model_only;
    model_only.data_files_readable = false;
    absl::StatusOr<JobConfig> config = LoadJobConfig(job, model_only);
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n",
                   std::string(config.status().message()).c_str());
      return 1;
    }
    const int b = config->training.batch_size;
    return ModelSection(config->model, {std::max(1, b / 2), b, 4 * b}, *blas,
                        gpu, tf32, seconds);
  }
  ModelConfig mlp;
  mlp.layers = {784, 256, 128, 10};
  if (ModelSection(mlp, {64, 256, 1024}, *blas, gpu, tf32, seconds) != 0) {
    return 1;
  }
  if (!gpu.ok()) return 0;
  return SgemmSection(tf32);
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
