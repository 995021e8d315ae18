#include "worker/model/model.h"

#include "absl/strings/str_cat.h"
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

absl::Status CheckStepArguments(int n, int max_batch, size_t params,
                                size_t grads, int64_t num_params) {
  if (n < 1 || n > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ComputeGradients: batch of ", n, " outside [1, ", max_batch, "]"));
  }
  if (static_cast<int64_t>(params) != num_params || grads != params) {
    return absl::InvalidArgumentError(
        absl::StrCat("ComputeGradients: ", params, " parameters and ", grads,
                     " gradients; the model has ", num_params));
  }
  return absl::OkStatus();
}

absl::Status CheckLogitsRoom(int n, int classes, size_t out) {
  if (n < 0 || out < static_cast<size_t>(n) * classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Logits: ", n, " samples of ", classes,
                     " classes, room for ", out, " logits"));
  }
  return absl::OkStatus();
}

}  // namespace paramd
