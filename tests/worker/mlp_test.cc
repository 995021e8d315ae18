// The CPU MLP: gradients against central finite differences, loss and
// accuracy on known inputs, and refusal of bad shapes.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "common/model/model_spec.h"
#include "tests/test_blas.h"
#include "worker/model/blas.h"
#include "worker/model/sequential.h"

namespace paramd {
namespace {

using testing::TheBlas;

struct Net {
  std::vector<int> layers{7, 5, 4, 3};
  ModelSpec spec;
  std::vector<float> params;
  std::vector<float> x;
  std::vector<int32_t> y;
  int n = 6;

  Net() {
    ModelConfig mc;
    mc.layers = layers;
    spec = BuildModelSpec(mc);
    params.resize(spec.total_elements);
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> u(-0.8f, 0.8f);
    for (float& p : params) p = u(gen);
    x.resize(n * layers[0]);
    for (float& v : x) v = u(gen);
    for (int i = 0; i < n; ++i) y.push_back(i % layers.back());
  }
};

TEST_CASE("MLP gradients match central finite differences", "[model]") {
  Net net;
  auto mlp_model = CpuSequential::Mlp(net.layers, 8, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  std::vector<float> grads(net.params.size());
  auto loss = mlp.ComputeGradients(net.params, net.x.data(), net.y.data(),
                                   net.n, absl::MakeSpan(grads));
  REQUIRE(loss.ok());
  CHECK(*loss > 0);
  std::vector<float> scratch(net.params.size());
  // Small enough that no ReLU input crosses zero between the two probes.
  const float eps = 1e-3f;
  int checked = 0;
  for (size_t i = 0; i < net.params.size(); ++i) {
    std::vector<float> p = net.params;
    p[i] += eps;
    const double up = *mlp.ComputeGradients(p, net.x.data(), net.y.data(),
                                            net.n, absl::MakeSpan(scratch));
    p[i] -= 2 * eps;
    const double down = *mlp.ComputeGradients(p, net.x.data(), net.y.data(),
                                              net.n, absl::MakeSpan(scratch));
    const double numeric = (up - down) / (2 * eps);
    INFO("parameter " << i << ": analytic " << grads[i] << ", numeric "
                      << numeric);
    CHECK(grads[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
    ++checked;
  }
  CHECK(checked == 7 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3);
}

TEST_CASE("the input gradient matches central finite differences", "[model]") {
  Net net;
  auto mlp_model = CpuSequential::Mlp(net.layers, 8, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  REQUIRE(mlp.InputGradient().empty());
  REQUIRE(mlp.EnableInputGradient().ok());
  std::vector<float> grads(net.params.size());
  REQUIRE(mlp.ComputeGradients(net.params, net.x.data(), net.y.data(), net.n,
                               absl::MakeSpan(grads))
              .ok());
  const std::vector<float> dx(mlp.InputGradient().begin(),
                              mlp.InputGradient().end());
  REQUIRE(dx.size() == net.x.size());
  const float eps = 1e-3f;
  for (size_t i = 0; i < net.x.size(); ++i) {
    std::vector<float> x = net.x;
    x[i] += eps;
    const double up = *mlp.ComputeGradients(net.params, x.data(), net.y.data(),
                                            net.n, absl::MakeSpan(grads));
    x[i] -= 2 * eps;
    const double down = *mlp.ComputeGradients(
        net.params, x.data(), net.y.data(), net.n, absl::MakeSpan(grads));
    const double numeric = (up - down) / (2 * eps);
    INFO("input " << i << ": analytic " << dx[i] << ", numeric " << numeric);
    CHECK(dx[i] == Approx(numeric).margin(2e-3).epsilon(2e-2));
  }
}

TEST_CASE("softmax cross-entropy of zero logits is log(classes)", "[model]") {
  Net net;
  std::fill(net.params.begin(), net.params.end(), 0.0f);
  auto mlp_model = CpuSequential::Mlp(net.layers, 8, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  std::vector<float> grads(net.params.size());
  auto loss = mlp.ComputeGradients(net.params, net.x.data(), net.y.data(),
                                   net.n, absl::MakeSpan(grads));
  REQUIRE(loss.ok());
  CHECK(*loss == Approx(std::log(3.0)));
}

TEST_CASE("CountCorrect follows the largest logit, in blocks", "[model]") {
  // One layer 2 → 2 with identity weights: the class is the larger input.
  auto mlp_model = CpuSequential::Mlp({2, 2}, 2, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  const std::vector<float> params = {1, 0, 0, 1, 0, 0};
  const std::vector<float> x = {3, 1, 0, 2, 5, 4, 1, 9, 7, 0};
  const std::vector<int32_t> y = {0, 1, 0, 0, 0};  // the 4th is wrong
  auto correct = mlp.CountCorrect(params, x.data(), y.data(), 5);
  REQUIRE(correct.ok());
  CHECK(*correct == 4);
}

TEST_CASE("bad shapes and labels are refused", "[model]") {
  Net net;
  auto mlp_model = CpuSequential::Mlp(net.layers, 4, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  std::vector<float> grads(net.params.size());
  CHECK_FALSE(mlp.ComputeGradients(net.params, net.x.data(), net.y.data(), 6,
                                   absl::MakeSpan(grads))
                  .ok());  // batch > max
  std::vector<float> short_params(net.params.size() - 1);
  CHECK_FALSE(mlp.ComputeGradients(short_params, net.x.data(), net.y.data(), 2,
                                   absl::MakeSpan(grads))
                  .ok());
  std::vector<int32_t> bad_labels = {0, 7};
  auto s = mlp.ComputeGradients(net.params, net.x.data(), bad_labels.data(), 2,
                                absl::MakeSpan(grads));
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.status().message()).find("label 7") != std::string::npos);
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

// StepHooks that hand out each parameter only when awaited (NaN before)
// and keep a copy of each gradient piece as it is reported.
struct Recorder {
  std::vector<float> truth;    // The parameters.
  std::vector<float> visible;  // What the model may read: NaN until awaited.
  std::vector<float> reported;
  std::vector<int> times_reported;
  int begins = 0;
  double loss_at_begin = 0;
  bool reported_before_begin = false;
  absl::Status fail_await;  // When set, await_params returns it.

  explicit Recorder(const std::vector<float>& params)
      : truth(params),
        visible(params.size(), NAN),
        reported(params.size(), NAN),
        times_reported(params.size(), 0) {}

  StepHooks Hooks(int64_t piece, absl::Span<const float> grads) {
    StepHooks h;
    h.piece = piece;
    h.await_params = [this](int64_t b, int64_t e) {
      if (!fail_await.ok()) return fail_await;
      std::copy(truth.begin() + b, truth.begin() + e, visible.begin() + b);
      return absl::OkStatus();
    };
    h.gradients_begin = [this](double loss) {
      ++begins;
      loss_at_begin = loss;
      return absl::OkStatus();
    };
    h.gradient_ready = [this, grads](int64_t b, int64_t e) {
      if (begins == 0) reported_before_begin = true;
      for (int64_t i = b; i < e; ++i) {
        reported[i] = grads[i];
        ++times_reported[i];
      }
    };
    return h;
  }
};

TEST_CASE(
    "overlapped compute reads each parameter only after awaiting it and "
    "reports each gradient element once, final, matching the plain compute",
    "[model][overlap]") {
  Net net;
  auto mlp_model = CpuSequential::Mlp(net.layers, 8, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  std::vector<float> expected(net.params.size());
  auto plain = mlp.ComputeGradients(net.params, net.x.data(), net.y.data(),
                                    net.n, absl::MakeSpan(expected));
  REQUIRE(plain.ok());
  // Pieces of 1 row, 2 rows (10 floats of a 5-wide layer) and whole layers.
  for (int64_t piece : {int64_t{1}, int64_t{10}, int64_t{0}}) {
    INFO("piece " << piece);
    Recorder r(net.params);
    std::vector<float> grads(net.params.size(), NAN);
    auto loss =
        mlp.ComputeOverlapped(r.visible, net.x.data(), net.y.data(), net.n,
                              absl::MakeSpan(grads), r.Hooks(piece, grads));
    REQUIRE(loss.ok());
    CHECK(*loss == Approx(*plain).epsilon(1e-6));
    CHECK(r.begins == 1);
    CHECK(r.loss_at_begin == *loss);
    CHECK_FALSE(r.reported_before_begin);
    for (size_t i = 0; i < grads.size(); ++i) {
      INFO("element " << i);
      // A parameter read before it was awaited would have made it NaN.
      REQUIRE(std::isfinite(grads[i]));
      CHECK(grads[i] == Approx(expected[i]).margin(1e-6));
      CHECK(r.times_reported[i] == 1);
      CHECK(r.reported[i] == grads[i]);  // Final when reported.
    }
  }
}

TEST_CASE("an await that fails ends the overlapped compute with its error",
          "[model][overlap]") {
  Net net;
  auto mlp_model = CpuSequential::Mlp(net.layers, 8, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  Recorder r(net.params);
  r.fail_await = absl::AbortedError("rank 0 is not registered");
  std::vector<float> grads(net.params.size());
  auto loss =
      mlp.ComputeOverlapped(r.visible, net.x.data(), net.y.data(), net.n,
                            absl::MakeSpan(grads), r.Hooks(4, grads));
  CHECK(absl::IsAborted(loss.status()));
  CHECK(r.begins == 0);
}

TEST_CASE(
    "the default overlapped compute awaits everything first and reports the "
    "whole gradient after the loss",
    "[model][overlap]") {
  Net net;
  auto mlp_model = CpuSequential::Mlp(net.layers, 8, 1, TheBlas());
  REQUIRE(mlp_model.ok());
  CpuSequential& mlp = **mlp_model;
  std::vector<float> expected(net.params.size());
  REQUIRE(mlp.ComputeGradients(net.params, net.x.data(), net.y.data(), net.n,
                               absl::MakeSpan(expected))
              .ok());
  Recorder r(net.params);
  std::vector<float> grads(net.params.size());
  Model& base = mlp;
  auto loss = base.Model::ComputeOverlapped(
      r.visible, net.x.data(), net.y.data(), net.n, absl::MakeSpan(grads),
      r.Hooks(4, grads));
  REQUIRE(loss.ok());
  CHECK(r.begins == 1);
  CHECK(grads == expected);
  for (size_t i = 0; i < grads.size(); ++i) {
    CHECK(r.times_reported[i] == 1);
  }
}

}  // namespace
}  // namespace paramd
