// CpuSequential: a layer graph (common/config/layer_shapes.h) on the CPU,
// its layers (worker/model/cpu_layers.h) run in order, ending in softmax
// cross-entropy. The width shorthand's MLP is the graph dense, relu, ...,
// dense, and computes exactly what the MLP did before graphs existed.
#ifndef PARAMD_WORKER_MODEL_SEQUENTIAL_H_
#define PARAMD_WORKER_MODEL_SEQUENTIAL_H_

#include <memory>
#include <vector>

#include "common/config/layer_shapes.h"
#include "worker/model/blas.h"
#include "worker/model/cpu_layers.h"
#include "worker/model/model.h"

namespace paramd {

class CpuSequential : public Model {
 public:
  // Training batches of up to `max_batch` samples; evaluation is split
  // into batches that keep the scratch under ~16 MB (at most max_batch).
  // `blas` must outlive the model.
  CpuSequential(LayerGraph graph, int max_batch, int threads, const Blas* blas);

  // The width shorthand's MLP: widths, inputs first, classes last; an
  // error names what the widths get wrong (as model.layers would).
  static absl::StatusOr<std::unique_ptr<CpuSequential>> Mlp(
      const std::vector<int>& widths, int max_batch, int threads,
      const Blas* blas);

  std::string Describe() const override;
  void SetStepSeed(uint64_t seed) override { seed_ = seed; }
  void TimeForward(bool on) override { time_forward_ = on; }
  absl::Time ForwardEnd() const override { return forward_end_; }
  absl::StatusOr<double> ComputeGradients(absl::Span<const float> params,
                                          const float* x, const int32_t* y,
                                          int n,
                                          absl::Span<float> grads) override;
  // Layer by layer: a layer waits for its parameters only (a dense layer
  // by row pieces of hooks.piece) and hands on its gradient as soon as it
  // is final.
  absl::StatusOr<double> ComputeOverlapped(absl::Span<const float> params,
                                           const float* x, const int32_t* y,
                                           int n, absl::Span<float> grads,
                                           const StepHooks& hooks) override;
  absl::Status EnableInputGradient() override;
  absl::Span<const float> InputGradient() const override {
    return absl::MakeConstSpan(input_grad_)
        .subspan(0, static_cast<size_t>(last_n_) * graph_.input.size());
  }
  absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                       const float* x, const int32_t* y,
                                       int n) override;
  absl::Status Logits(absl::Span<const float> params, const float* x, int n,
                      absl::Span<float> out) override;

 private:
  absl::StatusOr<double> Compute(absl::Span<const float> params, const float* x,
                                 const int32_t* y, int n,
                                 absl::Span<float> grads,
                                 const StepHooks* hooks);
  absl::Status CheckParams(const char* call, size_t params) const;
  // Runs the layers on x [n × input]; activations land in act_.
  absl::Status Forward(const LayerPass& pass, const float* x);
  // The loss summed over the batch of logits act_.back() against labels
  // `y`, and its gradient (/ n) into delta_.back().
  absl::StatusOr<double> SoftmaxCrossEntropy(const int32_t* y, int n);

  const LayerGraph graph_;
  const int max_batch_;
  const int threads_;
  const Blas* const blas_;
  std::vector<std::unique_ptr<CpuLayer>> layers_;
  int64_t num_params_ = 0;
  int eval_batch_ = 1;
  uint64_t seed_ = 0;
  bool time_forward_ = false;
  absl::Time forward_end_ = absl::InfinitePast();
  // act_[l]: layer l's output; delta_[l]: d(loss)/d(act_[l]). Grown to
  // the largest batch seen.
  std::vector<std::vector<float>> act_;
  std::vector<std::vector<float>> delta_;
  // d(loss)/d(x) of the last batch of last_n_, once enabled.
  bool want_input_grad_ = false;
  std::vector<float> input_grad_;
  int last_n_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_SEQUENTIAL_H_
