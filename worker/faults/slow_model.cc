#include "worker/faults/slow_model.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace paramd {

std::unique_ptr<Model> MaybeSlow(std::unique_ptr<Model> model,
                                 const TestingConfig& testing, int rank,
                                 Clock* clock) {
  if (rank != testing.slow_rank || testing.slow_step_ms <= 0) return model;
  return std::make_unique<SlowModel>(
      std::move(model), absl::Milliseconds(testing.slow_step_ms), clock);
}

std::string SlowModel::Describe() const {
  return absl::StrCat(inner_->Describe(), "; slowed by ",
                      absl::ToInt64Milliseconds(per_step_),
                      " ms per step (testing.slow_rank)");
}

void SlowModel::Lag() const { clock_->SleepUntil(clock_->Now() + per_step_); }

absl::StatusOr<double> SlowModel::ComputeGradients(
    absl::Span<const float> params, const float* x, const int32_t* y, int n,
    absl::Span<float> grads) {
  absl::StatusOr<double> loss =
      inner_->ComputeGradients(params, x, y, n, grads);
  if (loss.ok()) Lag();
  return loss;
}

absl::StatusOr<double> SlowModel::ComputeOverlapped(
    absl::Span<const float> params, const float* x, const int32_t* y, int n,
    absl::Span<float> grads, const StepHooks& hooks) {
  absl::StatusOr<double> loss =
      inner_->ComputeOverlapped(params, x, y, n, grads, hooks);
  if (loss.ok()) Lag();
  return loss;
}

}  // namespace paramd
