// paramd-compute-bench: the CPU side of a worker step, without servers.
//
// Prints OpenBLAS SGEMM throughput for the MLP's matrix shapes and the
// forward+backward time of the main job's MLP per batch size, so that a
// training run's samples/s can be read against what compute alone allows;
// with --job, the forward+backward time of that job's model (any layer
// graph) at half, once and twice its batch size instead.
//
//   bazel run //tools:compute_bench -- [--threads N] [--seconds S]
//                                       [--blas_core auto|library|NAME]
//                                       [--job J.yaml]
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "common/base/flags.h"
#include "common/config/job_file.h"
#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "tools/bench/bench_timing.h"
#include "worker/model/blas.h"
#include "worker/model/sequential.h"

namespace paramd {
namespace {

// OpenBLAS SGEMM for the MLP's shapes and a large square one.
void SgemmSection(const Blas& blas, int threads, double seconds,
                  std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::printf("SGEMM, %d thread(s): %s\n", threads, blas.description().c_str());
  std::printf("%-34s %12s %10s\n", "shape (M x N x K)", "us/call", "GFLOP/s");
  struct Shape {
    const char* what;
    int m, n, k;
    bool ta, tb;
  };
  const Shape shapes[] = {
      {"fc1 forward  64x256x784", 64, 256, 784, false, false},
      {"fc1 dW      784x256x64", 784, 256, 64, true, false},
      {"fc2 forward  64x128x256", 64, 128, 256, false, false},
      {"fc2 dX       64x256x128", 64, 256, 128, false, true},
      {"square     1024x1024x1024", 1024, 1024, 1024, false, false},
  };
  for (const Shape& s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n),
        c(size_t(s.m) * s.n);
    for (float& v : a) v = u(gen);
    for (float& v : b) v = u(gen);
    const double t = SecondsPerCall(seconds, [&] {
      blas.Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), s.ta ? s.m : s.k,
                 b.data(), s.tb ? s.k : s.n, 0.0f, c.data(), s.n);
      return true;
    });
    std::printf("%-34s %12.1f %10.1f\n", s.what, t * 1e6,
                2.0 * s.m * s.n * s.k / t / 1e9);
  }
}

// Forward multiply-adds ×2 (forward) ×3 (with backward), per sample.
double FlopsPerSample(const LayerGraph& g) {
  double macs = 0;
  for (const GraphLayer& l : g.layers) {
    if (l.config.kind == LayerKind::kDense)
      macs += double(l.in.size()) * l.out.c;
    if (l.config.kind == LayerKind::kConv2d) {
      macs += double(l.in.c) * l.config.kernel * l.config.kernel * l.out.size();
    }
  }
  return 6.0 * macs;
}

// A model's forward and backward per batch size; 1 on failure.
int ModelSection(const Blas& blas, const ModelConfig& mc, int threads,
                 double seconds, const std::vector<int>& batches,
                 std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-1, 1);
  absl::StatusOr<LayerGraph> graph = InferLayerGraph(mc);
  if (!graph.ok()) {
    std::fprintf(stderr, "%s\n", std::string(graph.status().message()).c_str());
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
  const int64_t inputs = graph->input.size();
  std::printf("\n%s forward+backward, %lld parameters, %d thread(s)\n",
              DescribeGraph(*graph).c_str(),
              static_cast<long long>(spec.total_elements), threads);
  std::printf("%-8s %12s %14s %10s\n", "batch", "us/step", "samples/s",
              "GFLOP/s");
  for (int batch : batches) {
    CpuSequential model(*graph, batch, threads, &blas);
    std::vector<float> x(size_t(batch) * inputs);
    std::vector<int32_t> y(batch);
    for (float& v : x) v = (u(gen) + 1) / 2;
    for (int i = 0; i < batch; ++i) y[i] = i % graph->classes();
    model.SetStepSeed(7);
    const double t = SecondsPerCall(seconds, [&] {
      return model
          .ComputeGradients(params, x.data(), y.data(), batch,
                            absl::MakeSpan(grads))
          .ok();
    });
    if (t < 0) {
      std::fprintf(stderr, "ComputeGradients failed at batch %d\n", batch);
      return 1;
    }
    std::printf("%-8d %12.1f %14.0f %10.1f\n", batch, t * 1e6, batch / t,
                FlopsPerSample(*graph) * batch / t / 1e9);
  }
  return 0;
}

int Main(int argc, char** argv) {
  auto flags =
      ParseFlags(argc, argv, {"threads", "seconds", "blas_core", "job"}, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  const int threads = *flags->GetInt("threads", 1);
  const double seconds = std::stod(flags->Get("seconds", "0.5"));
  absl::StatusOr<const Blas*> blas = LoadBlas(flags->Get("blas_core", "auto"));
  if (!blas.ok()) {
    std::fprintf(stderr, "%s\n", std::string(blas.status().message()).c_str());
    return 1;
  }
  (*blas)->SetThreads(threads);
  std::mt19937 gen(1);
  const std::string job = flags->Get("job", "");
  if (!job.empty()) {
    // The job's model at its batch size and around it.
    absl::StatusOr<JobConfig> config = LoadJobConfig(job);
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n",
                   std::string(config.status().message()).c_str());
      return 1;
    }
    const int b = config->training.batch_size;
    return ModelSection(**blas, config->model, threads, seconds,
                        {std::max(1, b / 2), b, 2 * b}, gen);
  }
  SgemmSection(**blas, threads, seconds, gen);
  ModelConfig mlp;
  mlp.layers = {784, 256, 128, 10};
  return ModelSection(**blas, mlp, threads, seconds, {64, 128, 256, 1024}, gen);
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
