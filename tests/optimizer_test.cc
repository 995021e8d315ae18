// SGD arithmetic, checked against values worked out by hand.
#include <catch2/catch.hpp>
#include <vector>

#include "server/optimizer.h"

namespace paramd {
namespace {

struct Run {
  std::vector<float> p;
  std::vector<std::vector<float>> slots;
};

Run Start(const Optimizer& opt, std::vector<float> p) {
  Run r{std::move(p), {}};
  for (int i = 0; i < opt.num_slots(); ++i) r.slots.emplace_back(r.p.size(), 0.0f);
  return r;
}

void Step(const Optimizer& opt, Run& r, std::vector<float> g, float scale,
          int64_t step) {
  opt.Apply(absl::MakeSpan(r.p), g, scale, absl::MakeSpan(r.slots), step);
}

TEST_CASE("plain SGD: p -= lr * g * scale", "[optimizer]") {
  SgdOptimizer opt(0.1f, 0.0f, 0.0f, false);
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
  SgdOptimizer opt(0.1f, 0.9f, 0.0f, false);
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
  SgdOptimizer opt(0.5f, 0.0f, 0.1f, false);
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
  SgdOptimizer opt(0.1f, 0.5f, 0.0f, true);
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
  c.type = "adamw";
  auto bad = MakeOptimizer(c);
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("optimizer.type") !=
        std::string::npos);
}

}  // namespace
}  // namespace paramd
