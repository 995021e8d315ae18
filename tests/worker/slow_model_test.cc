// SlowModel (worker/faults/slow_model.h): the slow rank's model waits
// slow_step_ms on the clock after each step's gradients (not after a
// failed step, and not on other ranks), and says so in Describe.
#include "worker/faults/slow_model.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "tests/stepping_clock.h"

namespace paramd {
namespace {

using testing::SteppingClock;

// A model whose steps return `loss` (or fail), counting them.
class StubModel final : public Model {
 public:
  std::string Describe() const override { return "stub"; }
  absl::StatusOr<double> ComputeGradients(absl::Span<const float>, const float*,
                                          const int32_t*, int,
                                          absl::Span<float>) override {
    ++steps;
    if (fail) return absl::AbortedError("register again");
    return 0.5;
  }
  absl::StatusOr<int64_t> CountCorrect(absl::Span<const float>, const float*,
                                       const int32_t*, int) override {
    return 7;
  }
  int steps = 0;
  bool fail = false;
};

TestingConfig SlowRank(int rank, int ms) {
  TestingConfig t;
  t.slow_rank = rank;
  t.slow_step_ms = ms;
  return t;
}

TEST_CASE("slow model: only the slow rank's model is wrapped",
          "[worker][faults]") {
  SteppingClock clock;
  auto stub = std::make_unique<StubModel>();
  Model* raw = stub.get();
  std::unique_ptr<Model> other =
      MaybeSlow(std::move(stub), SlowRank(1, 30), /*rank=*/0, &clock);
  CHECK(other.get() == raw);
  std::unique_ptr<Model> unset =
      MaybeSlow(std::move(other), SlowRank(0, 0), /*rank=*/0, &clock);
  CHECK(unset.get() == raw);
}

TEST_CASE(
    "slow model: each step waits slow_step_ms on the clock, a failed one "
    "does not, and the rest passes through",
    "[worker][faults]") {
  SteppingClock clock;
  auto stub = std::make_unique<StubModel>();
  StubModel* inner = stub.get();
  std::unique_ptr<Model> slow =
      MaybeSlow(std::move(stub), SlowRank(1, 30), /*rank=*/1, &clock);
  REQUIRE(slow.get() != inner);
  CHECK(slow->Describe() ==
        "stub; slowed by 30 ms per step (testing.slow_rank)");
  std::vector<float> params(4), grads(4);
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<double> loss = slow->ComputeGradients(
        params, nullptr, nullptr, 1, absl::MakeSpan(grads));
    REQUIRE(loss.ok());
    CHECK(*loss == 0.5);
  }
  CHECK(inner->steps == 3);
  CHECK(clock.sleeps == std::vector<absl::Duration>(3, absl::Milliseconds(30)));
  inner->fail = true;
  CHECK(absl::IsAborted(
      slow->ComputeGradients(params, nullptr, nullptr, 1, absl::MakeSpan(grads))
          .status()));
  CHECK(clock.sleeps.size() == 3);
  CHECK(*slow->CountCorrect(params, nullptr, nullptr, 1) == 7);
}

}  // namespace
}  // namespace paramd
