#include "worker/model/model.h"

#include "common/base/status_macros.h"

namespace paramd {

absl::StatusOr<double> Model::ComputeOverlapped(absl::Span<const float> params,
                                                const float* x,
                                                const int32_t* y, int n,
                                                absl::Span<float> grads,
                                                const StepHooks& hooks) {
  const auto all = static_cast<int64_t>(params.size());
  RETURN_IF_ERROR(hooks.await_params(0, all));
  ASSIGN_OR_RETURN(double loss, ComputeGradients(params, x, y, n, grads));
  RETURN_IF_ERROR(hooks.gradients_begin(loss));
  hooks.gradient_ready(0, static_cast<int64_t>(grads.size()));
  return loss;
}

}  // namespace paramd
