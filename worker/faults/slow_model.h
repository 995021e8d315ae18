// SlowModel: the job file's slow rank (testing.slow_rank, slow_step_ms) as
// a decorator around the rank's Model — each step's gradients take
// slow_step_ms longer, waited out on a Clock — so that tests and
// experiments see a straggler while the trainer runs its one path.
#ifndef PARAMD_WORKER_FAULTS_SLOW_MODEL_H_
#define PARAMD_WORKER_FAULTS_SLOW_MODEL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "worker/model/model.h"

namespace paramd {

// `model` itself unless `testing` makes `rank` the slow one; then a
// SlowModel around it on `clock` (which outlives it).
std::unique_ptr<Model> MaybeSlow(std::unique_ptr<Model> model,
                                 const TestingConfig& testing, int rank,
                                 Clock* clock);

class SlowModel final : public Model {
 public:
  SlowModel(std::unique_ptr<Model> inner, absl::Duration per_step, Clock* clock)
      : inner_(std::move(inner)), per_step_(per_step), clock_(clock) {}

  std::string Describe() const override;
  void SetStepSeed(uint64_t seed) override { inner_->SetStepSeed(seed); }
  void TimeForward(bool on) override { inner_->TimeForward(on); }
  absl::Time ForwardEnd() const override { return inner_->ForwardEnd(); }
  absl::StatusOr<double> ComputeGradients(absl::Span<const float> params,
                                          const float* x, const int32_t* y,
                                          int n,
                                          absl::Span<float> grads) override;
  absl::StatusOr<double> ComputeOverlapped(absl::Span<const float> params,
                                           const float* x, const int32_t* y,
                                           int n, absl::Span<float> grads,
                                           const StepHooks& hooks) override;
  absl::Status EnableInputGradient() override {
    return inner_->EnableInputGradient();
  }
  absl::Span<const float> InputGradient() const override {
    return inner_->InputGradient();
  }
  absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                       const float* x, const int32_t* y,
                                       int n) override {
    return inner_->CountCorrect(params, x, y, n);
  }
  absl::Status Logits(absl::Span<const float> params, const float* x, int n,
                      absl::Span<float> out) override {
    return inner_->Logits(params, x, n, out);
  }

 private:
  // Waits out per_step_ on the clock.
  void Lag() const;

  const std::unique_ptr<Model> inner_;
  const absl::Duration per_step_;
  Clock* const clock_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_FAULTS_SLOW_MODEL_H_
