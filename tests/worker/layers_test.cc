// The CPU's layers: each kind's forward against values written out by
// hand, each graph's backward (parameters and input) against central
// finite differences over strides, paddings, odd and non-square sizes and
// batches of 1; dropout's masks replay; the overlapped pass of a CNN
// equals the plain one.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "tests/layer_configs.h"
#include "tests/test_blas.h"
#include "worker/model/blas.h"
#include "worker/model/cpu_layers.h"
#include "worker/model/sequential.h"

namespace paramd {
namespace {

using testing::TheBlas;

using testing::Conv;
using testing::Dense;
using testing::Graph;
using testing::Kind;
using testing::Pool;

// Layer `i` of `g` on the CPU, its tensors where the graph's spec puts
// them.
std::unique_ptr<CpuLayer> LayerOf(const LayerGraph& g, size_t i) {
  const ModelSpec spec = GraphModelSpec(g);
  const FlatLayout layout(spec);
  return MakeCpuLayer(g.layers[i], LayerTensors::Of(g, spec, layout)[i],
                      TheBlas());
}

// Runs layer 0 of `m` forward on one sample.
std::vector<float> ForwardOne(ModelConfig m, const std::vector<float>& params,
                              const std::vector<float>& in) {
  // A head so that the graph is a model (it ends in class scores).
  m.graph.push_back(Kind(LayerKind::kFlatten));
  m.graph.push_back(Dense(2));
  absl::StatusOr<LayerGraph> g = InferLayerGraph(m);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  // `params` are layer 0's alone: the head's tensors come after them.
  const ModelSpec spec = GraphModelSpec(*g);
  const FlatLayout layout(spec);
  REQUIRE(LayerTensors::Of(*g, spec, layout).back().offset("weight") ==
          static_cast<int64_t>(params.size()));
  std::unique_ptr<CpuLayer> layer = LayerOf(*g, 0);
  std::vector<float> out(g->layers[0].out.size());
  LayerPass pass{params, {}, nullptr, false, 0, 1};
  REQUIRE(layer->Forward(pass, in.data(), out.data()).ok());
  return out;
}

TEST_CASE("conv2d's forward matches values written out", "[model][layers]") {
  const std::vector<float> image = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 1×3×3
  // One output channel, weight [[1, 0], [0, 1]], bias 0.5.
  const std::vector<float> params = {1, 0, 0, 1, 0.5f};
  // Stride 1, no padding: in[y][x] + in[y+1][x+1] + 0.5.
  CHECK(ForwardOne(Graph(1, 3, 3, {Conv(1, 2, 1, 0)}), params, image) ==
        std::vector<float>{6.5f, 8.5f, 12.5f, 14.5f});
  // Stride 2 over the image padded by 1 (5×5): windows at rows/cols 0, 2.
  CHECK(ForwardOne(Graph(1, 3, 3, {Conv(1, 2, 2, 1)}), params, image) ==
        std::vector<float>{1.5f, 3.5f, 7.5f, 14.5f});
  // Two input channels, two outputs: output o sums channel c times
  // weight (o + 1) · (c + 1) everywhere (kernel 1), plus bias o.
  const std::vector<float> two = {1, 2, 3, 4, 10, 20, 30, 40};  // 2×2×2
  CHECK(
      ForwardOne(Graph(2, 2, 2, {Conv(2, 1, 1, 0)}), {1, 2, 2, 4, 0, 1}, two) ==
      std::vector<float>{21, 42, 63, 84, 43, 85, 127, 169});
}

TEST_CASE("pooling's forward matches values written out", "[model][layers]") {
  const std::vector<float> image = {1, 5,  2,  0,  //
                                    3, 4,  8,  1,  //
                                    0, -1, 7,  6,  //
                                    2, 9,  -3, 4};
  CHECK(ForwardOne(Graph(1, 4, 4, {Pool(LayerKind::kMaxPool2d, 2, 2)}), {},
                   image) == std::vector<float>{5, 8, 9, 7});
  CHECK(ForwardOne(Graph(1, 4, 4, {Pool(LayerKind::kAvgPool2d, 2, 2)}), {},
                   image) == std::vector<float>{3.25f, 2.75f, 2.5f, 3.5f});
  // Odd size, stride 1 (3×3 → 2×2) and a window larger than the stride.
  const std::vector<float> odd = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK(ForwardOne(Graph(1, 3, 3, {Pool(LayerKind::kMaxPool2d, 2, 1)}), {},
                   odd) == std::vector<float>{5, 6, 8, 9});
  CHECK(ForwardOne(Graph(1, 3, 3, {Pool(LayerKind::kAvgPool2d, 3, 2)}), {},
                   odd) == std::vector<float>{5});
}

TEST_CASE("dense, relu and flatten match values written out",
          "[model][layers]") {
  ModelConfig m;
  m.input = InputConfig{2, 1, 1, false};
  m.graph = {Dense(3)};
  // W [2 × 3] = [[1, 2, 3], [4, 5, 6]], b = [0.5, 0, -1].
  CHECK(ForwardOne(m, {1, 2, 3, 4, 5, 6, 0.5f, 0, -1}, {1, -1}) ==
        std::vector<float>{-2.5f, -3, -4});
  m.graph = {Kind(LayerKind::kRelu)};
  CHECK(ForwardOne(m, {}, {-1, 2}) == std::vector<float>{0, 2});
  CHECK(ForwardOne(Graph(2, 1, 2, {Kind(LayerKind::kFlatten)}), {},
                   {1, 2, 3, 4}) == std::vector<float>{1, 2, 3, 4});
}

// A graph ending in a small dense head, with random parameters and data.
struct Probe {
  ModelConfig config;
  LayerGraph graph;
  std::vector<float> params, x;
  std::vector<int32_t> y;
  int n;

  Probe(ModelConfig m, int batch) : config(std::move(m)), n(batch) {
    absl::StatusOr<LayerGraph> g = InferLayerGraph(config);
    INFO(g.status().ToString());
    REQUIRE(g.ok());
    graph = *g;
    params.resize(BuildModelSpec(config).total_elements);
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> u(-0.9f, 0.9f);
    for (float& p : params) p = u(gen);
    x.resize(n * graph.input.size());
    for (float& v : x) v = u(gen);
    for (int i = 0; i < n; ++i) y.push_back(i % graph.classes());
  }
};

// Every parameter's and every input's gradient against (L(+ε) - L(-ε))/2ε;
// statistics (batch norm's running values) are no gradient and skipped.
void CheckFiniteDifferences(Probe& p) {
  const ModelSpec spec = BuildModelSpec(p.config);
  const FlatLayout layout(spec);
  std::vector<bool> statistic(p.params.size(), false);
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    if (spec.tensors[t].kind != TensorKind::kStatistic) continue;
    for (int64_t i = 0; i < spec.tensors[t].num_elements; ++i) {
      statistic[layout.offset[t] + i] = true;
    }
  }
  CpuSequential model(p.graph, p.n, 1, TheBlas());
  REQUIRE(model.EnableInputGradient().ok());
  model.SetStepSeed(5);
  std::vector<float> grads(p.params.size()), scratch(p.params.size());
  REQUIRE(model
              .ComputeGradients(p.params, p.x.data(), p.y.data(), p.n,
                                absl::MakeSpan(grads))
              .ok());
  const std::vector<float> dx(model.InputGradient().begin(),
                              model.InputGradient().end());
  REQUIRE(dx.size() == p.x.size());
  const float eps = 1e-3f;
  auto loss = [&](const std::vector<float>& params,
                  const std::vector<float>& x) {
    return *model.ComputeGradients(params, x.data(), p.y.data(), p.n,
                                   absl::MakeSpan(scratch));
  };
  for (size_t i = 0; i < p.params.size(); ++i) {
    if (statistic[i]) continue;
    std::vector<float> q = p.params;
    q[i] += eps;
    const double up = loss(q, p.x);
    q[i] -= 2 * eps;
    const double numeric = (up - loss(q, p.x)) / (2 * eps);
    INFO("parameter " << i << ": analytic " << grads[i] << ", numeric "
                      << numeric);
    CHECK(grads[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
  }
  for (size_t i = 0; i < p.x.size(); ++i) {
    std::vector<float> x = p.x;
    x[i] += eps;
    const double up = loss(p.params, x);
    x[i] -= 2 * eps;
    const double numeric = (up - loss(p.params, x)) / (2 * eps);
    INFO("input " << i << ": analytic " << dx[i] << ", numeric " << numeric);
    CHECK(dx[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
  }
}

TEST_CASE("each layer's backward matches central finite differences",
          "[model][layers]") {
  const LayerConfig flatten = Kind(LayerKind::kFlatten);
  struct Case {
    const char* what;
    ModelConfig model;
    int batch;
  };
  const Case cases[] = {
      {"conv k3 s1 p0, odd 5×5, 2 channels, batch 2",
       Graph(2, 5, 5, {Conv(3, 3, 1, 0), flatten, Dense(3)}), 2},
      {"conv k3 s2 p1 + relu, 7×7, batch 1",
       Graph(1, 7, 7,
             {Conv(2, 3, 2, 1), Kind(LayerKind::kRelu), flatten, Dense(3)}),
       1},
      {"conv k2 s2 p0, non-square 6×5",
       Graph(2, 6, 5, {Conv(2, 2, 2, 0), flatten, Dense(2)}), 2},
      {"conv k5 s1 p2 + max pool k2, batch 3",
       Graph(1, 6, 6,
             {Conv(2, 5, 1, 2), Pool(LayerKind::kMaxPool2d, 2, 2), flatten,
              Dense(3)}),
       3},
      {"max pool k3 s1 after conv k1, odd 5×5",
       Graph(2, 5, 5,
             {Conv(2, 1, 1, 0), Pool(LayerKind::kMaxPool2d, 3, 1), flatten,
              Dense(2)}),
       2},
      {"avg pool k3 s2, odd 7×7",
       Graph(2, 7, 7,
             {Conv(2, 1, 1, 0), Pool(LayerKind::kAvgPool2d, 3, 2), flatten,
              Dense(3)}),
       2},
      {"conv + batch norm per channel + relu, batch 3",
       Graph(2, 5, 5,
             {Conv(3, 3, 1, 1), Kind(LayerKind::kBatchNorm),
              Kind(LayerKind::kRelu), flatten, Dense(3)}),
       3},
      {"batch norm per feature on a flat input, batch 4",
       Graph(1, 2, 3,
             {flatten, Dense(5), Kind(LayerKind::kBatchNorm), Dense(3)}),
       4},
      {"dense + relu + dropout 0.3 + dense (the mask fixed by the seed)",
       Graph(1, 3, 4,
             {flatten, Dense(6), Kind(LayerKind::kRelu),
              Kind(LayerKind::kDropout, 0.3), Dense(3)}),
       2},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      Probe p(c.model, c.batch);
      CheckFiniteDifferences(p);
    }
  }
}

// An embedding_concat front of `fields` rows of dim 2 and `dense` dense
// features, then `layers`: its input is what the front gives.
ModelConfig ConcatGraph(int fields, int dense,
                        std::vector<LayerConfig> layers) {
  ModelConfig m;
  m.type = ModelType::kEmbeddingConcat;
  EmbeddingTableConfig t;
  t.name = "clicks";
  t.rows = 1000;
  t.dim = 2;
  m.embeddings.push_back(t);
  LayerConfig front;
  front.kind = LayerKind::kEmbeddingConcat;
  front.table = "clicks";
  front.fields = fields;
  front.dense = dense;
  m.graph.push_back(front);
  for (LayerConfig& l : layers) m.graph.push_back(l);
  return m;
}

LayerConfig Bottom(int out) {
  LayerConfig c = Dense(out);
  c.kind = LayerKind::kBottomDense;
  return c;
}

TEST_CASE("bottom_dense transforms the dense features and passes the rows",
          "[model][layers][dense]") {
  // 2 fields × dim 2 pass through; the 3 dense values x become
  // relu(x · W + b) of 2, W = [[1, 0], [0, 1], [1, -1]], b = (0.5, -10).
  ModelConfig m = ConcatGraph(2, 3, {Bottom(2), Dense(2)});
  absl::StatusOr<LayerGraph> g = InferLayerGraph(m);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  REQUIRE(g->input.size() == 7);
  CHECK(g->layers[0].passthrough == 4);
  CHECK(g->layers[0].out.size() == 6);
  CHECK(g->layers[0].name == "bottom1");
  CHECK(DescribeGraph(*g) ==
        "embedding_concat(table 0, 2 fields × dim 2 + 3 dense) flat 7 "
        "bottom_dense(2) dense(2)");
  const ModelSpec spec = GraphModelSpec(*g);
  REQUIRE(spec.tensors[0].name == "bottom1.weight");
  CHECK(spec.tensors[0].shape == std::vector<int64_t>{3, 2});
  CHECK(spec.tensors[1].shape == std::vector<int64_t>{2});
  CHECK(spec.tensors[2].shape == std::vector<int64_t>{6, 2});  // fc1
  std::vector<float> params(spec.total_elements, 0.0f);
  const std::vector<float> w = {1, 0, 0, 1, 1, -1}, b = {0.5f, -10};
  std::copy(w.begin(), w.end(), params.begin());
  std::copy(b.begin(), b.end(), params.begin() + 6);
  std::unique_ptr<CpuLayer> layer = LayerOf(*g, 0);
  const std::vector<float> in = {9, 8, 7, 6, 1, 2, 3};
  std::vector<float> out(6);
  LayerPass pass{params, {}, nullptr, false, 0, 1};
  REQUIRE(layer->Forward(pass, in.data(), out.data()).ok());
  // (1 + 3 + 0.5, relu(2 - 3 - 10)).
  CHECK(out == std::vector<float>{9, 8, 7, 6, 4.5f, 0});
}

TEST_CASE("bottom_dense's backward matches central finite differences",
          "[model][layers][dense]") {
  for (int batch : {1, 3}) {
    INFO("batch " << batch);
    // Two bottom layers (the second's input is the first's output), then
    // the top MLP; every input's gradient, rows' part included.
    Probe p(ConcatGraph(3, 4,
                        {Bottom(5), Bottom(2), Dense(4), Kind(LayerKind::kRelu),
                         Dense(2)}),
            batch);
    CheckFiniteDifferences(p);
  }
}

TEST_CASE("bottom_dense is refused where it has no dense features to read",
          "[model][layers][dense]") {
  auto error = [](const ModelConfig& m) {
    absl::StatusOr<LayerGraph> g = InferLayerGraph(m);
    return g.ok() ? std::string() : std::string(g.status().message());
  };
  const std::string needs =
      "model.layers[1] (bottom_dense): reads the dense features an "
      "embedding_concat layer with `dense` appends";
  CHECK_THAT(error(ConcatGraph(2, 0, {Bottom(2), Dense(2)})),
             Catch::StartsWith(needs));
  CHECK_THAT(error(ConcatGraph(2, 3, {Dense(4), Bottom(2), Dense(2)})),
             Catch::StartsWith("model.layers[2] (bottom_dense): reads"));
  CHECK_THAT(error(ConcatGraph(2, 3, {Bottom(0), Dense(2)})),
             Catch::StartsWith("model.layers[1] (bottom_dense).out: must be "
                               "in [1, 1048576], not 0"));
  CHECK_THAT(
      error(Graph(1, 2, 2, {Kind(LayerKind::kFlatten), Bottom(2), Dense(2)})),
      Catch::Contains("(bottom_dense): reads the dense features"));
}

TEST_CASE("batch norm pushes its statistics' change and evaluates with them",
          "[model][layers]") {
  // One channel of 2×2 over a batch of 2: values 1..8, mean 4.5, biased
  // variance 5.25, unbiased 6.
  ModelConfig m =
      Graph(1, 2, 2,
            {Kind(LayerKind::kBatchNorm), Kind(LayerKind::kFlatten), Dense(2)});
  m.graph[0].momentum = 0.1;
  Probe p(m, 2);
  p.x = {1, 2, 3, 4, 5, 6, 7, 8};
  const ModelSpec spec = BuildModelSpec(m);
  REQUIRE(spec.tensors.size() == 6);
  CHECK(spec.tensors[2].name == "bn1.running_mean");
  CHECK(spec.tensors[2].kind == TensorKind::kStatistic);
  CHECK(spec.tensors[3].name == "bn1.running_var");
  CHECK(spec.tensors[0].kind == TensorKind::kTrainable);
  // As the servers initialise them: gamma 1, beta 0, mean 0, var 1.
  const FlatLayout layout(spec);
  for (size_t t = 0; t < 4; ++t) {
    InitTensorRange(spec.tensors[t], 1, static_cast<int>(t), 0,
                    absl::MakeSpan(p.params).subspan(layout.offset[t], 1));
  }
  CHECK(std::vector<float>(p.params.begin(), p.params.begin() + 4) ==
        std::vector<float>{1, 0, 0, 1});
  CpuSequential model(p.graph, p.n, 1, TheBlas());
  std::vector<float> grads(p.params.size());
  REQUIRE(model
              .ComputeGradients(p.params, p.x.data(), p.y.data(), p.n,
                                absl::MakeSpan(grads))
              .ok());
  CHECK(grads[2] == Approx(0.1 * 4.5));
  CHECK(grads[3] == Approx(0.1 * (6 - 1)));
  // Evaluation normalises with the running values the servers hold: with
  // mean 4.5 and variance 5.25 (the batch's own) it gives what training's
  // forward gave; with the initial ones, the input unchanged.
  std::vector<float> params = p.params;
  params[2] = 4.5f;
  params[3] = 5.25f;
  LayerPass train{params, absl::MakeSpan(grads), nullptr, true, 0, 2};
  LayerPass eval{params, {}, nullptr, false, 0, 2};
  auto bn = LayerOf(p.graph, 0);
  std::vector<float> a(8), b(8);
  REQUIRE(bn->Forward(train, p.x.data(), a.data()).ok());
  REQUIRE(bn->Forward(eval, p.x.data(), b.data()).ok());
  for (int i = 0; i < 8; ++i) CHECK(b[i] == Approx(a[i]).margin(1e-5));
  CHECK(a[0] == Approx((1 - 4.5) / std::sqrt(5.25 + 1e-5)));
  LayerPass initial{p.params, {}, nullptr, false, 0, 2};
  REQUIRE(bn->Forward(initial, p.x.data(), b.data()).ok());
  for (int i = 0; i < 8; ++i) {
    CHECK(b[i] == Approx(p.x[i] / std::sqrt(1 + 1e-5)));
  }
}

TEST_CASE("dropout's masks replay from the step's seed", "[model][layers]") {
  Probe p(Graph(1, 4, 4,
                {Kind(LayerKind::kFlatten), Dense(8),
                 Kind(LayerKind::kDropout, 0.5), Dense(3)}),
          4);
  CpuSequential a(p.graph, p.n, 1, TheBlas()), b(p.graph, p.n, 1, TheBlas());
  auto grads_at = [&](CpuSequential& m, uint64_t seed) {
    std::vector<float> g(p.params.size());
    m.SetStepSeed(seed);
    REQUIRE(m.ComputeGradients(p.params, p.x.data(), p.y.data(), p.n,
                               absl::MakeSpan(g))
                .ok());
    return g;
  };
  const std::vector<float> first = grads_at(a, 42);
  CHECK(grads_at(b, 99) != first);
  CHECK(grads_at(b, 42) == first);  // Another instance, the same seed.
  CHECK(grads_at(a, 42) == first);  // A retried step.
  // Evaluation does not drop: the seed does not matter.
  a.SetStepSeed(1);
  const int64_t correct1 = *a.CountCorrect(p.params, p.x.data(), p.y.data(), 4);
  a.SetStepSeed(2);
  CHECK(*a.CountCorrect(p.params, p.x.data(), p.y.data(), 4) == correct1);
  // About p of the elements are dropped.
  int kept = 0;
  for (int64_t i = 0; i < 10000; ++i) kept += DropoutKeeps(7, 3, i, 0.25);
  CHECK(kept > 7300);
  CHECK(kept < 7700);
}

TEST_CASE("a CNN's overlapped pass equals the plain one", "[model][layers]") {
  Probe p(Graph(1, 8, 8,
                {Conv(4, 3, 1, 1), Kind(LayerKind::kRelu),
                 Pool(LayerKind::kMaxPool2d, 2, 2), Kind(LayerKind::kFlatten),
                 Dense(5), Kind(LayerKind::kDropout, 0.2), Dense(3)}),
          3);
  CpuSequential model(p.graph, p.n, 1, TheBlas());
  model.SetStepSeed(3);
  std::vector<float> plain(p.params.size()), overlapped(p.params.size());
  const double loss = *model.ComputeGradients(p.params, p.x.data(), p.y.data(),
                                              p.n, absl::MakeSpan(plain));
  // Parameters not yet awaited are NaN: reading one early shows.
  std::vector<float> visible(p.params.size(), std::nanf(""));
  std::vector<int> reported(p.params.size(), 0);
  StepHooks hooks;
  hooks.piece = 7;
  hooks.await_params = [&](int64_t begin, int64_t end) {
    std::copy(p.params.begin() + begin, p.params.begin() + end,
              visible.begin() + begin);
    return absl::OkStatus();
  };
  hooks.gradients_begin = [&](double l) {
    CHECK(l == Approx(loss).epsilon(1e-6));
    return absl::OkStatus();
  };
  hooks.gradient_ready = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) ++reported[i];
  };
  absl::StatusOr<double> got = model.ComputeOverlapped(
      visible, p.x.data(), p.y.data(), p.n, absl::MakeSpan(overlapped), hooks);
  REQUIRE(got.ok());
  // The same sums, the bias added last instead of first.
  CHECK(*got == Approx(loss).epsilon(1e-6));
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("gradient element " << i);
    CHECK(overlapped[i] == Approx(plain[i]).epsilon(1e-4).margin(1e-6));
  }
  for (size_t i = 0; i < reported.size(); ++i) {
    INFO("gradient element " << i);
    CHECK(reported[i] == 1);
  }
}

}  // namespace
}  // namespace paramd
