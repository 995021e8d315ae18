// Optimizer arithmetic: SGD against values worked out by hand; Adam, AdamW,
// RMSprop and Adagrad against the same formulas computed in float64 over
// several steps; learning-rate schedules against hand values.
#include "server/optimizer/optimizer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

namespace paramd {
namespace {

struct Run {
  std::vector<float> p;
  std::vector<std::vector<float>> slots;
};

Run Start(const Optimizer& opt, std::vector<float> p) {
  Run r{std::move(p), {}};
  for (int i = 0; i < opt.num_slots(); ++i)
    r.slots.emplace_back(r.p.size(), 0.0f);
  return r;
}

void Step(const Optimizer& opt, Run& r, std::vector<float> g, float scale,
          int64_t step) {
  opt.Apply(absl::MakeSpan(r.p), g, scale, absl::MakeSpan(r.slots), step);
}

TEST_CASE("plain SGD: p -= lr * g * scale", "[optimizer]") {
  SgdOptimizer opt(LearningRateSchedule::Constant(0.1f), 0.0f, 0.0f, false);
  CHECK(opt.num_slots() == 0);
  Run r = Start(opt, {1.0f, -2.0f});
  Step(opt, r, {0.5f, -1.0f}, 1.0f, 1);
  CHECK(r.p[0] == Approx(0.95f));
  CHECK(r.p[1] == Approx(-1.9f));
  // scale 0.5: the mean of two workers' summed gradients.
  Step(opt, r, {2.0f, 2.0f}, 0.5f, 2);
  CHECK(r.p[0] == Approx(0.85f));
  CHECK(r.p[1] == Approx(-2.0f));
}

TEST_CASE("SGD with momentum over three steps", "[optimizer]") {
  // lr 0.1, mu 0.9, p0 = 1, gradients 1, 2, 3:
  //   v1 = 1             p1 = 1 - 0.1 * 1     = 0.9
  //   v2 = 0.9 + 2 = 2.9 p2 = 0.9 - 0.29      = 0.61
  //   v3 = 2.61 + 3 = 5.61 p3 = 0.61 - 0.561  = 0.049
  SgdOptimizer opt(LearningRateSchedule::Constant(0.1f), 0.9f, 0.0f, false);
  REQUIRE(opt.num_slots() == 1);
  Run r = Start(opt, {1.0f});
  Step(opt, r, {1.0f}, 1.0f, 1);
  CHECK(r.p[0] == Approx(0.9f));
  CHECK(r.slots[0][0] == Approx(1.0f));
  Step(opt, r, {2.0f}, 1.0f, 2);
  CHECK(r.p[0] == Approx(0.61f));
  CHECK(r.slots[0][0] == Approx(2.9f));
  Step(opt, r, {3.0f}, 1.0f, 3);
  CHECK(r.p[0] == Approx(0.049f));
  CHECK(r.slots[0][0] == Approx(5.61f));
}

TEST_CASE("SGD with weight decay adds wd * p to the gradient", "[optimizer]") {
  // lr 0.5, wd 0.1, p0 = 2, g = 1: g' = 1.2, p1 = 2 - 0.6 = 1.4
  // then g = 0: g' = 0.14, p2 = 1.4 - 0.07 = 1.33
  SgdOptimizer opt(LearningRateSchedule::Constant(0.5f), 0.0f, 0.1f, false);
  Run r = Start(opt, {2.0f});
  Step(opt, r, {1.0f}, 1.0f, 1);
  CHECK(r.p[0] == Approx(1.4f));
  Step(opt, r, {0.0f}, 1.0f, 2);
  CHECK(r.p[0] == Approx(1.33f));
}

TEST_CASE("SGD with Nesterov momentum", "[optimizer]") {
  // lr 0.1, mu 0.5, p0 = 1, g = 1 then 1:
  //   v1 = 1,   d1 = 1 + 0.5 * 1   = 1.5,  p1 = 0.85
  //   v2 = 1.5, d2 = 1 + 0.5 * 1.5 = 1.75, p2 = 0.675
  SgdOptimizer opt(LearningRateSchedule::Constant(0.1f), 0.5f, 0.0f, true);
  Run r = Start(opt, {1.0f});
  Step(opt, r, {1.0f}, 1.0f, 1);
  CHECK(r.p[0] == Approx(0.85f));
  Step(opt, r, {1.0f}, 1.0f, 2);
  CHECK(r.p[0] == Approx(0.675f));
}

TEST_CASE("MakeOptimizer builds SGD from the job and refuses unknown types",
          "[optimizer]") {
  OptimizerConfig c;
  c.type = "sgd";
  c.learning_rate = 0.1;
  c.momentum = 0.9;
  auto opt = MakeOptimizer(c);
  REQUIRE(opt.ok());
  CHECK((*opt)->num_slots() == 1);
  c.type = "lamb";
  auto bad = MakeOptimizer(c);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("optimizer.type") !=
        std::string::npos);
}

// A float64 reference of each optimizer's update (PyTorch's formulas), on
// one parameter vector over `steps` steps of gradients g(t, i).
struct Reference {
  std::string type;
  double lr = 0.01, momentum = 0, wd = 0, beta1 = 0.9, beta2 = 0.999,
         alpha = 0.99, eps = 1e-8;

  std::vector<double> Run(std::vector<double> p, int steps) const {
    const size_t n = p.size();
    std::vector<double> m(n, 0), v(n, 0), b(n, 0);
    for (int t = 1; t <= steps; ++t) {
      for (size_t i = 0; i < n; ++i) {
        double g = Grad(t, i);
        if (type == "adamw")
          p[i] *= 1 - lr * wd;
        else
          g += wd * p[i];
        if (type == "adam" || type == "adamw") {
          m[i] = beta1 * m[i] + (1 - beta1) * g;
          v[i] = beta2 * v[i] + (1 - beta2) * g * g;
          const double mhat = m[i] / (1 - std::pow(beta1, t));
          p[i] -= lr * mhat /
                  (std::sqrt(v[i]) / std::sqrt(1 - std::pow(beta2, t)) + eps);
        } else if (type == "rmsprop") {
          v[i] = alpha * v[i] + (1 - alpha) * g * g;
          const double d = g / (std::sqrt(v[i]) + eps);
          if (momentum > 0) {
            b[i] = momentum * b[i] + d;
            p[i] -= lr * b[i];
          } else {
            p[i] -= lr * d;
          }
        } else if (type == "adagrad") {
          v[i] += g * g;
          p[i] -= lr * g / (std::sqrt(v[i]) + eps);
        }
      }
    }
    return p;
  }

  static double Grad(int t, size_t i) {
    return std::sin(0.7 * t + 1.3 * static_cast<double>(i)) * (1 + 0.1 * t);
  }
};

// The float implementation `opt` over the same steps, with the gradient
// passed pre-scaled by 2 and grad_scale 0.5 (as sync averaging does).
std::vector<float> RunFloat(const Optimizer& opt, std::vector<float> p,
                            int steps) {
  std::vector<std::vector<float>> slots(opt.num_slots(),
                                        std::vector<float>(p.size(), 0.0f));
  std::vector<float> g(p.size());
  for (int t = 1; t <= steps; ++t) {
    for (size_t i = 0; i < p.size(); ++i) {
      g[i] = static_cast<float>(2 * Reference::Grad(t, i));
    }
    opt.Apply(absl::MakeSpan(p), g, 0.5f, absl::MakeSpan(slots), t);
  }
  return p;
}

void CheckAgainstReference(const Reference& ref, const Optimizer& opt) {
  std::vector<double> p0;
  for (int i = 0; i < 16; ++i) p0.push_back(0.5 - 0.07 * i);
  const std::vector<double> expected = ref.Run(p0, 6);
  const std::vector<float> actual =
      RunFloat(opt, std::vector<float>(p0.begin(), p0.end()), 6);
  double moved = 0;
  for (size_t i = 0; i < p0.size(); ++i) {
    INFO(ref.type << " element " << i);
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-6));
    moved += std::fabs(expected[i] - p0[i]);
  }
  CHECK(moved > 0.01);  // the steps really changed the parameters
}

TEST_CASE("Adam matches its float64 definition over 6 steps", "[optimizer]") {
  Reference ref{"adam"};
  ref.lr = 0.01;
  ref.wd = 0.01;
  CheckAgainstReference(ref, AdamOptimizer(LearningRateSchedule::Constant(0.01),
                                           0.9f, 0.999f, 1e-8f, 0.01f, false));
}

TEST_CASE("AdamW decouples weight decay", "[optimizer]") {
  Reference ref{"adamw"};
  ref.lr = 0.01;
  ref.wd = 0.1;
  CheckAgainstReference(ref, AdamOptimizer(LearningRateSchedule::Constant(0.01),
                                           0.9f, 0.999f, 1e-8f, 0.1f, true));
  // With zero gradients only the decay acts: p *= 1 - lr * wd per step.
  AdamOptimizer opt(LearningRateSchedule::Constant(0.5), 0.9f, 0.999f, 1e-8f,
                    0.2f, true);
  std::vector<float> p = {1.0f}, g = {0.0f};
  std::vector<std::vector<float>> slots(2, std::vector<float>(1, 0.0f));
  opt.Apply(absl::MakeSpan(p), g, 1.0f, absl::MakeSpan(slots), 1);
  CHECK(p[0] == Approx(0.9f));
}

TEST_CASE("RMSprop matches its float64 definition, with and without momentum",
          "[optimizer]") {
  Reference ref{"rmsprop"};
  ref.lr = 0.001;
  ref.wd = 0.01;
  CheckAgainstReference(
      ref, RmspropOptimizer(LearningRateSchedule::Constant(0.001), 0.99f, 1e-8f,
                            0.0f, 0.01f));
  ref.momentum = 0.9;
  RmspropOptimizer with_momentum(LearningRateSchedule::Constant(0.001), 0.99f,
                                 1e-8f, 0.9f, 0.01f);
  CHECK(with_momentum.num_slots() == 2);
  CheckAgainstReference(ref, with_momentum);
}

TEST_CASE("Adagrad matches its float64 definition over 6 steps",
          "[optimizer]") {
  Reference ref{"adagrad"};
  ref.lr = 0.1;
  ref.eps = 1e-10;
  CheckAgainstReference(
      ref, AdagradOptimizer(LearningRateSchedule::Constant(0.1), 1e-10f, 0.0f));
  // By hand: s = 4, p = 1 - 0.1 * 2 / 2 = 0.9.
  AdagradOptimizer opt(LearningRateSchedule::Constant(0.1), 1e-10f, 0.0f);
  std::vector<float> p = {1.0f}, g = {2.0f};
  std::vector<std::vector<float>> slots(1, std::vector<float>(1, 0.0f));
  opt.Apply(absl::MakeSpan(p), g, 1.0f, absl::MakeSpan(slots), 1);
  CHECK(p[0] == Approx(0.9f));
  CHECK(slots[0][0] == Approx(4.0f));
}

TEST_CASE("learning-rate schedules", "[optimizer][schedule]") {
  ScheduleConfig c;
  CHECK(LearningRateSchedule(0.1, c).At(1) == Approx(0.1));
  CHECK(LearningRateSchedule(0.1, c).At(100000) == Approx(0.1));

  c.type = ScheduleType::kStep;
  c.step_size = 10;
  c.gamma = 0.5;
  const LearningRateSchedule step(0.1, c);
  CHECK(step.At(1) == Approx(0.1));
  CHECK(step.At(10) == Approx(0.1));
  CHECK(step.At(11) == Approx(0.05));
  CHECK(step.At(21) == Approx(0.025));

  c.type = ScheduleType::kCosine;
  c.total_steps = 101;
  c.min_lr = 0.01;
  const LearningRateSchedule cosine(0.1, c);
  CHECK(cosine.At(1) == Approx(0.1));
  CHECK(cosine.At(51) == Approx(0.055));  // halfway: (0.1 + 0.01) / 2
  CHECK(cosine.At(101) == Approx(0.01));
  CHECK(cosine.At(500) == Approx(0.01));  // stays at min_lr

  c.warmup_steps = 4;
  c.total_steps = 105;
  const LearningRateSchedule warm(0.1, c);
  CHECK(warm.At(1) == Approx(0.025));
  CHECK(warm.At(4) == Approx(0.1));
  CHECK(warm.At(5) == Approx(0.1));  // cosine starts after warm-up
  CHECK(warm.At(55) == Approx(0.055));
}

TEST_CASE("an optimizer follows its schedule", "[optimizer][schedule]") {
  ScheduleConfig c;
  c.warmup_steps = 2;
  SgdOptimizer opt(LearningRateSchedule(1.0, c), 0.0f, 0.0f, false);
  std::vector<float> p = {0.0f}, g = {1.0f};
  std::vector<std::vector<float>> none;
  opt.Apply(absl::MakeSpan(p), g, 1.0f, absl::MakeSpan(none), 1);
  CHECK(p[0] == Approx(-0.5f));  // lr 0.5 at step 1 of a 2-step warm-up
  opt.Apply(absl::MakeSpan(p), g, 1.0f, absl::MakeSpan(none), 2);
  CHECK(p[0] == Approx(-1.5f));  // lr 1
}

TEST_CASE("MakeOptimizer builds each type", "[optimizer]") {
  OptimizerConfig c;
  c.learning_rate = 0.01;
  for (auto [type, slots] :
       {std::pair{"sgd", 0}, std::pair{"adam", 2}, std::pair{"adamw", 2},
        std::pair{"rmsprop", 1}, std::pair{"adagrad", 1}}) {
    c.type = type;
    auto opt = MakeOptimizer(c);
    INFO(type);
    REQUIRE(opt.ok());
    CHECK((*opt)->num_slots() == slots);
  }
}

}  // namespace
}  // namespace paramd
