#include "tests/device_compare.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <utility>

#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "tests/layer_configs.h"
#include "tests/test_blas.h"
#include "worker/model/cpu_layers.h"
#include "worker/model/device_layers.h"
#include "worker/model/device_sequential.h"
#include "worker/model/sequential.h"
#include "worker/test_tally.h"

namespace paramd::testing {
namespace {

LayerGraph GraphOf(const ModelConfig& m) {
  absl::StatusOr<LayerGraph> g = InferLayerGraph(m);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  return *g;
}

// Random parameters of `spec`, the running variances positive.
std::vector<float> RandomParams(const ModelSpec& spec, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-0.9f, 0.9f);
  std::vector<float> params;
  for (const TensorSpec& t : spec.tensors) {
    const bool variance =
        t.name.size() > 12 &&
        t.name.compare(t.name.size() - 12, 12, ".running_var") == 0;
    for (int64_t i = 0; i < t.num_elements; ++i) {
      params.push_back(variance ? 0.5f + std::abs(u(gen)) : u(gen));
    }
  }
  return params;
}

std::vector<float> Random(size_t count, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-0.9f, 0.9f);
  std::vector<float> v(count);
  for (float& x : v) x = u(gen);
  return v;
}

std::unique_ptr<DeviceOps> Ops(const OpsFactory& make) {
  absl::StatusOr<std::unique_ptr<DeviceOps>> ops = make();
  INFO(ops.status().ToString());
  REQUIRE(ops.ok());
  return *std::move(ops);
}

// Host vectors on the device and back.
DeviceArray<float> Up(DeviceOps& ops, const std::vector<float>& v) {
  absl::StatusOr<DeviceArray<float>> a =
      DeviceArray<float>::Make(&ops, v.size());
  REQUIRE(a.ok());
  REQUIRE(ops.CopyToDevice(a->get(), v.data(), v.size() * sizeof(float)).ok());
  return *std::move(a);
}
std::vector<float> Down(DeviceOps& ops, const DeviceArray<float>& a) {
  std::vector<float> v(a.size());
  REQUIRE(ops.CopyToHost(v.data(), a.get(), v.size() * sizeof(float)).ok());
  REQUIRE(ops.Finish().ok());
  return v;
}

void CheckClose(const char* what, const std::vector<float>& device,
                const std::vector<float>& cpu, double tolerance) {
  REQUIRE(device.size() == cpu.size());
  const double err = RelativeError(device, cpu);
  INFO(what << ": relative error " << err << " over " << cpu.size()
            << " values");
  CHECK(err <= tolerance);
  for (float v : device) {
    if (!std::isfinite(v)) {
      INFO(what << ": a value is not finite");
      CHECK(std::isfinite(v));
      break;
    }
  }
}

}  // namespace

std::vector<LayerCase> DeviceLayerCases() {
  const LayerConfig flatten = Kind(LayerKind::kFlatten);
  const LayerConfig relu = Kind(LayerKind::kRelu);
  const LayerConfig bn = Kind(LayerKind::kBatchNorm);
  return {
      {"conv k3 s1 p0, odd 5×5, 2 channels, batch 2",
       Graph(2, 5, 5, {Conv(3, 3, 1, 0), flatten, Dense(3)}), 2},
      {"conv k3 s2 p1 + relu, 7×7, batch 1",
       Graph(1, 7, 7, {Conv(2, 3, 2, 1), relu, flatten, Dense(3)}), 1},
      {"conv k2 s2 p0, non-square 6×5",
       Graph(2, 6, 5, {Conv(2, 2, 2, 0), flatten, Dense(2)}), 2},
      {"conv k5 s1 p2 + max pool k2, batch 3",
       Graph(1, 6, 6,
             {Conv(2, 5, 1, 2), Pool(LayerKind::kMaxPool2d, 2, 2), flatten,
              Dense(3)}),
       3},
      {"conv k3 s2 p2, 3 channels in, non-square 9×7",
       Graph(3, 9, 7, {Conv(4, 3, 2, 2), flatten, Dense(3)}), 2},
      {"max pool k3 s1 after conv k1, odd 5×5",
       Graph(2, 5, 5,
             {Conv(2, 1, 1, 0), Pool(LayerKind::kMaxPool2d, 3, 1), flatten,
              Dense(2)}),
       2},
      {"max pool k3 s2 (windows overlap), 7×8",
       Graph(2, 7, 8, {Pool(LayerKind::kMaxPool2d, 3, 2), flatten, Dense(2)}),
       2},
      {"avg pool k3 s2, odd 7×7",
       Graph(2, 7, 7,
             {Conv(2, 1, 1, 0), Pool(LayerKind::kAvgPool2d, 3, 2), flatten,
              Dense(3)}),
       2},
      {"avg pool k2 s2, 8×6, batch 1",
       Graph(3, 8, 6, {Pool(LayerKind::kAvgPool2d, 2, 2), flatten, Dense(2)}),
       1},
      {"conv + batch norm per channel + relu, batch 3",
       Graph(2, 5, 5, {Conv(3, 3, 1, 1), bn, relu, flatten, Dense(3)}), 3},
      {"batch norm per feature on a flat input, batch 4",
       Graph(1, 2, 3, {flatten, Dense(5), bn, Dense(3)}), 4},
      {"dense + relu + dropout 0.3 + dense",
       Graph(
           1, 3, 4,
           {flatten, Dense(6), relu, Kind(LayerKind::kDropout, 0.3), Dense(3)}),
       2},
  };
}

ModelConfig MainMlp() {
  ModelConfig m;
  m.layers = {784, 256, 128, 10};
  return m;
}

ModelConfig SmallCnn() {
  return Graph(1, 12, 12,
               {Conv(4, 3, 1, 1), Kind(LayerKind::kBatchNorm),
                Kind(LayerKind::kRelu), Pool(LayerKind::kMaxPool2d, 2, 2),
                Conv(6, 3, 1, 0), Kind(LayerKind::kRelu),
                Pool(LayerKind::kAvgPool2d, 2, 2), Kind(LayerKind::kFlatten),
                Dense(12), Kind(LayerKind::kDropout, 0.25), Dense(10)});
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

void CompareEachLayer(const LayerCase& c, const OpsFactory& make,
                      double tolerance) {
  const LayerGraph g = GraphOf(c.model);
  const ModelSpec spec = GraphModelSpec(g);
  const FlatLayout layout(spec);
  const std::vector<LayerTensors> tensors = LayerTensors::Of(g, spec, layout);
  std::mt19937 gen(17);
  const std::vector<float> params = RandomParams(spec, gen);
  const int n = c.batch;
  std::unique_ptr<DeviceOps> ops = Ops(make);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const GraphLayer& l = g.layers[i];
    INFO("layer " << i << " (" << LayerKindName(l.config.kind) << "), "
                  << l.in.ToString() << " -> " << l.out.ToString());
    const size_t in_size = n * l.in.size(), out_size = n * l.out.size();
    const std::vector<float> x = Random(in_size, gen);
    const std::vector<float> dout = Random(out_size, gen);
    const uint64_t seed = 5 + i;
    // The CPU's.
    std::unique_ptr<CpuLayer> cpu = MakeCpuLayer(l, tensors[i], TheBlas());
    std::vector<float> cpu_out(out_size), cpu_eval(out_size), cpu_din(in_size),
        cpu_grads(params.size(), 0.0f);
    LayerPass eval{params, {}, nullptr, false, seed, n};
    REQUIRE(cpu->Forward(eval, x.data(), cpu_eval.data()).ok());
    LayerPass train{params, absl::MakeSpan(cpu_grads), nullptr, true, seed, n};
    REQUIRE(cpu->Forward(train, x.data(), cpu_out.data()).ok());
    cpu->Backward(train, x.data(), cpu_out.data(), dout.data(), cpu_din.data());
    // The device's.
    absl::StatusOr<std::unique_ptr<DeviceLayer>> dev =
        MakeDeviceLayer(l, tensors[i], ops.get(), n);
    INFO(dev.status().ToString());
    REQUIRE(dev.ok());
    DeviceArray<float> d_params = Up(*ops, params);
    DeviceArray<float> d_grads = Up(*ops, std::vector<float>(params.size()));
    DeviceArray<float> d_x = Up(*ops, x);
    DeviceArray<float> d_dout = Up(*ops, dout);
    DeviceArray<float> d_out = Up(*ops, std::vector<float>(out_size));
    DeviceArray<float> d_din = Up(*ops, std::vector<float>(in_size));
    const DevicePass d_eval{d_params.get(), nullptr, false, seed, n};
    REQUIRE((*dev)->Forward(d_eval, d_x.get(), d_out.get()).ok());
    CheckClose("forward, evaluating", Down(*ops, d_out), cpu_eval, tolerance);
    const DevicePass d_train{d_params.get(), d_grads.get(), true, seed, n};
    REQUIRE((*dev)->Forward(d_train, d_x.get(), d_out.get()).ok());
    CheckClose("forward, training", Down(*ops, d_out), cpu_out, tolerance);
    REQUIRE((*dev)
                ->Backward(d_train, d_x.get(), d_out.get(), d_dout.get(),
                           d_din.get())
                .ok());
    CheckClose("input gradient", Down(*ops, d_din), cpu_din, tolerance);
    CheckClose("parameter gradients", Down(*ops, d_grads), cpu_grads,
               tolerance);
    // The range a layer's tensors span is what the CPU's layer writes.
    for (size_t e = 0; e < cpu_grads.size(); ++e) {
      const bool inside = static_cast<int64_t>(e) >= (*dev)->begin() &&
                          static_cast<int64_t>(e) < (*dev)->end();
      if (!inside && cpu_grads[e] != 0) {
        INFO("gradient element " << e << " outside the layer's range ["
                                 << (*dev)->begin() << ", " << (*dev)->end()
                                 << ")");
        CHECK(inside);
        break;
      }
    }
  }
}

void CompareWholeStep(const ModelConfig& model, int batch,
                      const OpsFactory& make, double tolerance) {
  const LayerGraph g = GraphOf(model);
  const ModelSpec spec = GraphModelSpec(g);
  std::mt19937 gen(23);
  std::vector<float> params = RandomParams(spec, gen);
  for (float& p : params) p *= 0.3f;  // A trainable scale for deep stacks.
  const int64_t inputs = g.input.size();
  const int eval_n = 2 * batch + 1;
  std::vector<float> x(eval_n * inputs);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  for (float& v : x) v = u01(gen);
  std::vector<int32_t> y(eval_n);
  for (int i = 0; i < eval_n; ++i) {
    y[i] = static_cast<int32_t>(gen() % g.classes());
  }
  CpuSequential cpu(g, eval_n, 1, TheBlas());
  absl::StatusOr<std::unique_ptr<DeviceSequential>> dev =
      DeviceSequential::Create(g, batch, Ops(make));
  INFO(dev.status().ToString());
  REQUIRE(dev.ok());
  REQUIRE(cpu.EnableInputGradient().ok());
  REQUIRE((*dev)->EnableInputGradient().ok());
  cpu.SetStepSeed(9);
  (*dev)->SetStepSeed(9);
  std::vector<float> g_cpu(params.size()), g_dev(params.size());
  absl::StatusOr<double> l_cpu = cpu.ComputeGradients(
      params, x.data(), y.data(), batch, absl::MakeSpan(g_cpu));
  absl::StatusOr<double> l_dev = (*dev)->ComputeGradients(
      params, x.data(), y.data(), batch, absl::MakeSpan(g_dev));
  REQUIRE(l_cpu.ok());
  INFO(l_dev.status().ToString());
  REQUIRE(l_dev.ok());
  CHECK(*l_dev == Approx(*l_cpu).epsilon(tolerance));
  CheckClose("gradients", g_dev, g_cpu, tolerance);
  const absl::Span<const float> dx_cpu = cpu.InputGradient();
  const absl::Span<const float> dx_dev = (*dev)->InputGradient();
  CheckClose("input gradient", {dx_dev.begin(), dx_dev.end()},
             {dx_cpu.begin(), dx_cpu.end()}, tolerance);
  absl::StatusOr<int64_t> c_cpu =
      cpu.CountCorrect(params, x.data(), y.data(), eval_n);
  absl::StatusOr<int64_t> c_dev =
      (*dev)->CountCorrect(params, x.data(), y.data(), eval_n);
  REQUIRE(c_cpu.ok());
  REQUIRE(c_dev.ok());
  CHECK(*c_dev == *c_cpu);
  // Evaluation's logits, in blocks of the device's batch: alike, and the
  // largest of each is what CountCorrect counted.
  const int classes = g.classes();
  std::vector<float> z_cpu(static_cast<size_t>(eval_n) * classes),
      z_dev(z_cpu.size());
  REQUIRE(cpu.Logits(params, x.data(), eval_n, absl::MakeSpan(z_cpu)).ok());
  absl::Status z =
      (*dev)->Logits(params, x.data(), eval_n, absl::MakeSpan(z_dev));
  INFO(z.ToString());
  REQUIRE(z.ok());
  CheckClose("logits", z_dev, z_cpu, tolerance);
  TestTally tally(classes);
  tally.AddLogits(z_cpu.data(), y.data(), eval_n);
  EpochReport evaluated;
  tally.Fill(eval_n, &evaluated);
  CHECK(static_cast<int64_t>(evaluated.test_correct) == *c_cpu);
  CHECK(absl::IsInvalidArgument((*dev)->Logits(
      params, x.data(), eval_n, absl::MakeSpan(z_dev).subspan(1))));

  // Overlapped: parameters not yet awaited are NaN, so reading one early
  // shows; every gradient element is handed on once, after the loss.
  std::vector<float> visible(params.size(), std::nanf(""));
  std::vector<int> reported(params.size(), 0);
  bool began = false;
  StepHooks hooks;
  hooks.await_params = [&](int64_t begin, int64_t end) {
    std::copy(params.begin() + begin, params.begin() + end,
              visible.begin() + begin);
    return absl::OkStatus();
  };
  hooks.gradients_begin = [&](double loss) {
    CHECK(loss == Approx(*l_dev).epsilon(1e-6));
    began = true;
    return absl::OkStatus();
  };
  std::vector<float> g_over(params.size(), std::nanf(""));
  hooks.gradient_ready = [&](int64_t begin, int64_t end) {
    CHECK(began);
    for (int64_t i = begin; i < end; ++i) ++reported[i];
  };
  absl::StatusOr<double> l_over = (*dev)->ComputeOverlapped(
      visible, x.data(), y.data(), batch, absl::MakeSpan(g_over), hooks);
  INFO(l_over.status().ToString());
  REQUIRE(l_over.ok());
  CHECK(*l_over == *l_dev);
  CHECK(g_over == g_dev);
  for (size_t i = 0; i < reported.size(); ++i) {
    if (reported[i] != 1) {
      INFO("gradient element " << i << " reported " << reported[i] << " times");
      CHECK(reported[i] == 1);
      break;
    }
  }
  // An error from the hooks ends the step with that error.
  hooks.gradients_begin = [](double) {
    return absl::AbortedError("the rank was dropped");
  };
  CHECK(
      absl::IsAborted((*dev)
                          ->ComputeOverlapped(params, x.data(), y.data(), batch,
                                              absl::MakeSpan(g_over), hooks)
                          .status()));
}

}  // namespace paramd::testing
