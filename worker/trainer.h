// Trainer: one worker's training loop — register, then per step pull →
// compute → push → tick the clock; at each epoch end evaluate this rank's
// share of the test set and report the epoch to shard 0. A background
// thread sends heartbeats; at the end the worker tells the shards it
// finished.
//
// The worker keeps no state that must survive: a restarted worker
// registers again and continues from the clock the servers give it, and a
// worker the servers dropped (its push answered Aborted) does the same.
//
// It talks to the shards through a ParameterClient made by the factory it
// is given: over gRPC in paramd-worker, in process in tests.
#ifndef PARAMD_WORKER_TRAINER_H_
#define PARAMD_WORKER_TRAINER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "common/config/layer_shapes.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "worker/data/training_data.h"
#include "worker/heartbeats.h"
#include "worker/model/embedding_front.h"
#include "worker/model/image_features.h"
#include "worker/model/model.h"
#include "worker/parameter_client.h"
#include "worker/worker_timeline.h"

namespace paramd {

struct TrainerOptions {
  // Stop after this many steps in total (then pull once more); < 0: run
  // every epoch of the job.
  int64_t max_steps = -1;
  // Called with every pulled (version, parameters).
  std::function<void(uint64_t, absl::Span<const float>)> on_pull;
  // Called after every step with (clock before the step, batch loss).
  std::function<void(uint64_t, double)> on_step;
  // Times epochs and a slow rank's steps (worker/faults); outlives
  // the trainer.
  Clock* clock = RealClock();
};

class Trainer {
 public:
  // Loads the data and checks it fits the model; the client is made by
  // `make_client` when Run starts.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const JobConfig& config, int rank, TrainerOptions options,
      ParameterClientFactory make_client);

  absl::Status Run();

  // The parameters last pulled (flat, in model-spec order).
  const std::vector<float>& params() const { return params_; }

 private:
  Trainer(const JobConfig& config, int rank, TrainerOptions options,
          ParameterClientFactory make_client, ModelSpec spec,
          PartitionPlan plan, std::unique_ptr<TrainingData> data,
          std::optional<SparseFront> front);

  // The running epoch's figures.
  struct EpochState {
    int epoch = -1;  // The epoch whose order data_ holds.
    absl::Time start;
    double loss_sum = 0;
    int64_t samples = 0;
  };
  // Batch buffers.
  struct Batch {
    SampleBatch samples;
    std::vector<float> augment_scratch;  // One image (data.augment).
  };

  absl::Status PullAt(uint64_t clock);
  absl::Status Train();
  // Pulls, computes and pushes the step at `*clock`, advancing it (or, when
  // a shard dropped this rank, registering again and moving it to the clock
  // the shards give). Adds the batch to `epoch`.
  absl::Status Step(uint64_t* clock, Batch* batch, EpochState* epoch,
                    bool* stepped);
  // worker.overlap: the step's compute through StepHooks, its exchange
  // left in flight (pending_) for the next step's forward pass to read.
  // Whether the step is traced; when it began, and its data (InfinitePast
  // untraced).
  struct StepBegin {
    bool traced;
    absl::Time step, data;
  };
  absl::Status OverlappedStep(uint64_t* clock, const float* input,
                              const int32_t* y, int n, absl::Span<float> grads,
                              EpochState* epoch, bool* stepped,
                              StepBegin times);
  // A step's times, for the timeline: each InfinitePast untraced.
  struct StepTimes {
    bool traced = false;
    absl::Time began, data, compute, push;
    absl::Time Stamp() const {
      return traced ? absl::Now() : absl::InfinitePast();
    }
  };
  // The batch of `step` (its index in the epoch) at `clock`: the one made
  // while the last step waited, or made now; augmented as the data section
  // says with `step_seed`. Returns its samples.
  absl::StatusOr<int> MakeBatch(uint64_t clock, int64_t step,
                                uint64_t step_seed, Batch* batch);
  // Forward and backward of `n` samples into `grads` (and the sparse
  // front's row gradients, handed to the client for the push); the loss.
  absl::StatusOr<double> Compute(const float* input, const int32_t* labels,
                                 int n, absl::Span<float> grads, bool traced);
  // The step's push and the pull of clock + 1 into params_, the next
  // batch made meanwhile (same epoch only); the version pulled.
  absl::StatusOr<uint64_t> Exchange(uint64_t clock, int64_t step,
                                    absl::Span<const float> grads, double loss,
                                    bool traced);
  // The step's spans on the timeline; `bytes` pushed.
  void TraceStep(uint64_t clock, const StepTimes& times, double loss,
                 uint64_t version, size_t bytes);

  // Waits for the exchange in flight, if any: params_ then hold the clock
  // after its step. Its error is returned (ABORTED: register again).
  absl::Status FinishPending();

  // Registers (again) and returns the clock to continue from.
  absl::StatusOr<uint64_t> Join();
  void LogStart(uint64_t clock) const;
  // Evaluates and reports the epoch `state` ran, whose steps took
  // `seconds`.
  // `*clock` moves when the rank had to register again.
  absl::Status EndEpoch(const EpochState& state, double seconds,
                        uint64_t* clock);
  // Models with a sparse front: the batch's ids (the data's, or its
  // images' features) as the dense layers' input (front_out_), their rows
  // pulled for a worker at `clock`.
  absl::StatusOr<const float*> FrontInput(uint64_t clock,
                                          const SampleBatch& samples, int n);
  // Evaluates this rank's test share at `clock` into the report's test
  // fields (worker/test_tally.h).
  absl::Status EvaluateTest(uint64_t clock, EpochReport* report);
  // After `why` (ABORTED: a shard no longer counts the rank), registers
  // again; `*clock` is where training goes on.
  absl::Status Rejoin(const absl::Status& why, uint64_t* clock);
  // With policy.backup_workers: a rank whose pull brought `version`, a
  // round beyond `*clock` (rounds closed without it, its pushes dropped),
  // continues there — at most to its epoch's end — skipping those
  // batches.
  void SkipAhead(uint64_t version, uint64_t* clock) const;

  const JobConfig config_;
  const int rank_;
  TrainerOptions options_;
  ParameterClientFactory make_client_;
  const ModelSpec spec_;
  const PartitionPlan plan_;
  const FlatLayout layout_;
  // This rank's shares of the training and the test split (samples i with
  // i % workers == rank): images as bytes, or click logs streamed.
  const std::unique_ptr<TrainingData> data_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ParameterClient> client_;
  // A batch of the test share, converted per evaluation batch; the
  // model's classes, and a binary classifier's logits on such a batch.
  SampleBatch eval_;
  int classes_ = 0;
  std::vector<float> logits_;

  std::vector<float> params_;
  int64_t pulled_clock_ = -1;  // Clock whose parameters params_ holds.
  // Models with a sparse front: it, with images the features that give
  // their ids, its output and its rows' gradients.
  std::optional<EmbeddingFront> front_;
  std::optional<ImageFeatures> features_;
  std::vector<uint64_t> image_ids_;
  std::vector<float> front_out_;
  std::vector<float> row_grads_;
  // worker.overlap: the last step's exchange, still bringing the next
  // clock's parameters into params_ (after it is destroyed before client_);
  // the step it pushed and its loss; next_params_, the buffer the next
  // exchange fills while a step's backward pass still reads params_.
  std::unique_ptr<StepExchange> pending_;
  uint64_t pending_clock_ = 0;
  double pending_loss_ = 0;
  absl::Time exchange_begin_ =
      absl::InfinitePast();  // pending_'s start, traced
  std::vector<float> next_params_;
  // Made with client_ (and destroyed before it).
  std::unique_ptr<Heartbeats> heartbeats_;
  // The step timeline (tracing): lane 0, one "step" per clock with its
  // data, forward+backward and push+pull.
  WorkerTimeline trace_;
  // A traced step's calls to each shard (its StepReport's times).
  std::vector<ShardCallTimes> call_times_;
  // The next step's batch, made while a step's exchange was in flight
  // (StepRequest::while_waiting): its clock (-1: none) and size.
  SampleBatch prefetched_;
  int64_t prefetched_clock_ = -1;
  int prefetched_n_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_TRAINER_H_
