// Trainer: one worker's training loop — register, then per step pull →
// compute → push → tick the clock; at each epoch end evaluate this rank's
// share of the test set and report the epoch to shard 0. A background
// thread sends heartbeats; at the end the worker tells the shards it
// finished.
//
// The worker keeps no state that must survive: a restarted worker
// registers again and continues from the clock the servers give it, and a
// worker the servers dropped (its push answered Aborted) does the same.
#ifndef PARAMD_WORKER_TRAINER_H_
#define PARAMD_WORKER_TRAINER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/job_config.h"
#include "common/model_spec.h"
#include "common/partitioner.h"
#include "worker/dataset.h"
#include "worker/model.h"
#include "worker/parameter_client.h"

namespace paramd {

struct TrainerOptions {
  // One "host:port" per shard; empty means the job file's cluster.servers.
  std::vector<std::string> servers;
  // Stop after this many steps in total (then pull once more); < 0: run
  // every epoch of the job.
  int64_t max_steps = -1;
  // Called with every pulled (version, parameters).
  std::function<void(uint64_t, absl::Span<const float>)> on_pull;
  // Called after every step with (clock before the step, batch loss).
  std::function<void(uint64_t, double)> on_step;
  ClientOptions client;
};

class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const JobConfig& config, int rank, TrainerOptions options);

  absl::Status Run();

  // The parameters last pulled (flat, in model-spec order).
  const std::vector<float>& params() const { return params_; }

 private:
  Trainer(const JobConfig& config, int rank, TrainerOptions options,
          ModelSpec spec, PartitionPlan plan, Dataset train, Dataset test);

  absl::Status PullAt(uint64_t clock);
  absl::Status Train();
  // Registers (again) and returns the clock to continue from.
  absl::StatusOr<uint64_t> Join();
  void HeartbeatLoop();
  absl::Status EndEpoch(int epoch, double loss_sum, int64_t samples,
                        double seconds);

  const JobConfig config_;
  const int rank_;
  TrainerOptions options_;
  const ModelSpec spec_;
  const PartitionPlan plan_;
  const FlatLayout layout_;
  const Dataset train_;
  const Dataset test_;
  std::unique_ptr<DataShard> shard_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ParameterClient> client_;
  // This rank's share of the test set, as floats.
  std::vector<float> test_x_;
  std::vector<int32_t> test_y_;

  std::vector<float> params_;
  int64_t pulled_clock_ = -1;  // Clock whose parameters params_ holds.

  // The heartbeat thread's state.
  absl::Mutex mu_;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_TRAINER_H_
