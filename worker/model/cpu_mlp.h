// CpuMlp: the MLP on the CPU, its matrix products in OpenBLAS's SGEMM.
//
// Why OpenBLAS: the CPU GEMM decides training speed. Debian's OpenBLAS with
// its AVX-512 kernel runs the MLP's products at 80-110 GFLOP/s on one core
// of this machine class, against 17 for its SSE3 fallback and far less for
// the reference BLAS (docs/performance.md); a hand-written kernel would not
// beat it. Its thread count is set per process (worker.threads) so that
// several workers do not oversubscribe the cores.
#ifndef PARAMD_WORKER_MODEL_CPU_MLP_H_
#define PARAMD_WORKER_MODEL_CPU_MLP_H_

#include <vector>

#include "worker/model/blas.h"
#include "worker/model/model.h"

namespace paramd {

class CpuMlp : public Model {
 public:
  // `layers`: widths, inputs first, classes last. Batches of up to
  // `max_batch` samples; larger evaluation calls are split.
  // `blas` must outlive the model.
  CpuMlp(std::vector<int> layers, int max_batch, int threads, const Blas* blas);

  std::string Describe() const override;
  absl::StatusOr<double> ComputeGradients(absl::Span<const float> params,
                                          const float* x, const int32_t* y,
                                          int n,
                                          absl::Span<float> grads) override;
  // Layer by layer, and a layer's weight in row pieces of hooks.piece:
  // each piece's product waits for that piece only.
  absl::StatusOr<double> ComputeOverlapped(absl::Span<const float> params,
                                           const float* x, const int32_t* y,
                                           int n, absl::Span<float> grads,
                                           const StepHooks& hooks) override;
  absl::Status EnableInputGradient() override;
  absl::Span<const float> InputGradient() const override {
    return absl::MakeConstSpan(input_grad_)
        .subspan(0, static_cast<size_t>(last_n_) * layers_[0]);
  }
  absl::StatusOr<int64_t> CountCorrect(absl::Span<const float> params,
                                       const float* x, const int32_t* y,
                                       int n) override;

 private:
  absl::StatusOr<double> Compute(absl::Span<const float> params, const float* x,
                                 const int32_t* y, int n,
                                 absl::Span<float> grads,
                                 const StepHooks* hooks);
  // Runs the layers on x [n × inputs]; activations land in act_. With
  // hooks, waits for each piece of the parameters before using it.
  // The loss summed over the batch of logits act_.back() against labels
  // `y`, and its gradient (/ n) into delta_.back().
  absl::StatusOr<double> SoftmaxCrossEntropy(const int32_t* y, int n);
  // Back through the layers from delta_.back(): every gradient into
  // `grads` (each piece handed to `hooks` as soon as it is final), and the
  // input's gradient when enabled.
  void Backward(absl::Span<const float> params, const float* x, int n,
                absl::Span<float> grads, const StepHooks* hooks);
  absl::Status Forward(absl::Span<const float> params, const float* x, int n,
                       const StepHooks* hooks = nullptr);
  // Rows of layer `layer`'s weight per piece under `hooks` (all without).
  int RowsPerPiece(const StepHooks* hooks, int layer) const;
  const float* Weight(absl::Span<const float> params, int layer) const;
  const float* Bias(absl::Span<const float> params, int layer) const;

  const std::vector<int> layers_;
  const int max_batch_;
  const int threads_;
  const Blas* const blas_;
  std::vector<int64_t> weight_offset_;
  std::vector<int64_t> bias_offset_;
  int64_t num_params_ = 0;
  // act_[l]: layer l's output [max_batch × layers_[l+1]], post-ReLU except
  // the last (logits). delta_[l]: the loss gradient at layer l's output.
  std::vector<std::vector<float>> act_;
  std::vector<std::vector<float>> delta_;
  // d(loss)/d(x) of the last batch of last_n_, once enabled.
  bool want_input_grad_ = false;
  std::vector<float> input_grad_;
  int last_n_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_CPU_MLP_H_
