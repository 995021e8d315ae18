// Model: a layer graph's forward and backward passes behind one interface,
// so that the compute backends (cpu, cuda) are interchangeable.
//
// Parameters and gradients are flat float buffers: the model spec's tensors
// concatenated in order (FlatLayout gives each tensor's offset). A Model
// holds scratch buffers, so one instance is used by one thread at a time.
#ifndef PARAMD_WORKER_MODEL_MODEL_H_
#define PARAMD_WORKER_MODEL_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/model_spec.h"

namespace paramd {

// How a training step overlaps its compute with the wire (worker.overlap):
// the forward pass waits for each piece of the parameters just before it
// uses it, and the backward pass hands on each piece of the gradient as
// soon as it is final. Ranges are flat [begin, end) offsets.
struct StepHooks {
  // A layer's weight is used and produced in pieces of whole rows of at
  // most this many floats (at least one row); 0: a layer at a time.
  int64_t piece = 0;
  // Blocks until params [begin, end) may be read; an error ends the step.
  std::function<absl::Status(int64_t begin, int64_t end)> await_params;
  // The forward pass is done: `loss` is the batch's and the gradient's
  // pieces follow; an error ends the step.
  std::function<absl::Status(double loss)> gradients_begin;
  // grads [begin, end) are final (each element is reported once).
  std::function<void(int64_t begin, int64_t end)> gradient_ready;
};

class Model {
 public:
  virtual ~Model() = default;

  // Which backend runs this model, e.g. "cpu (OpenBLAS, 1 thread)".
  virtual std::string Describe() const = 0;

  // The seed of the steps that follow (until set again): what dropout's
  // masks derive from, so that a retried or restored step computes the
  // same gradient. The trainer sets it per step from (job seed, rank,
  // clock).
  virtual void SetStepSeed(uint64_t seed) {}

  // The step timeline: with `on`, the next ComputeGradients notes when its
  // forward pass (and the loss) ended, for ForwardEnd. Backends that do
  // not split the two keep ForwardEnd at InfinitePast.
  virtual void TimeForward(bool on) {}
  virtual absl::Time ForwardEnd() const { return absl::InfinitePast(); }

  // Mean softmax cross-entropy over the batch x [n × inputs], labels y;
  // writes d(loss)/d(params) into `grads` (same layout as `params`).
  virtual absl::StatusOr<double> ComputeGradients(
      absl::Span<const float> params, const float* x, const int32_t* y, int n,
      absl::Span<float> grads) = 0;

  // ComputeGradients through `hooks`. This default waits for every
  // parameter first and hands on the whole gradient at the end; backends
  // that can do better go layer by layer.
  virtual absl::StatusOr<double> ComputeOverlapped(
      absl::Span<const float> params, const float* x, const int32_t* y, int n,
      absl::Span<float> grads, const StepHooks& hooks);

  // From now on ComputeGradients also yields d(loss)/d(x) [n × inputs]
  // (InputGradient), for a sparse front that feeds the model
  // (worker/model/embedding_bag.h). Unimplemented where a backend cannot.
  virtual absl::Status EnableInputGradient() {
    return absl::UnimplementedError(
        absl::StrCat(Describe(), ": no input gradient on this backend"));
  }
  virtual absl::Span<const float> InputGradient() const { return {}; }

  // How many of the n samples the model classifies correctly.
  virtual absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                               const float* x, const int32_t* y,
                                               int n) = 0;

  // The n samples' logits, n × classes into `out` (at least that long),
  // as evaluation computes them (no dropout; batch norm's running
  // statistics). Unimplemented where a backend cannot.
  virtual absl::Status Logits(absl::Span<const float> params, const float* x,
                              int n, absl::Span<float> out) {
    return absl::UnimplementedError(
        absl::StrCat(Describe(), ": no logits for evaluation"));
  }
};

// What every backend's ComputeGradients refuses before it computes: a
// batch outside [1, max_batch], parameters or gradients not num_params
// long. InvalidArgument naming the call, else OK.
absl::Status CheckStepArguments(int n, int max_batch, size_t params,
                                size_t grads, int64_t num_params);

// What Logits refuses: n < 0, or `out` shorter than n × classes.
absl::Status CheckLogitsRoom(int n, int classes, size_t out);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_MODEL_H_
