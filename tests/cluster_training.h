// Training a whole job's workers against a LocalCluster in one test
// process, and what to check of the run: every worker in its own thread
// through the gRPC client, each pulled version's parameters hashed and
// each step's loss kept.
#ifndef PARAMD_TESTS_CLUSTER_TRAINING_H_
#define PARAMD_TESTS_CLUSTER_TRAINING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "tests/local_cluster.h"
#include "worker/trainer.h"

namespace paramd::testing {

// FNV-1a of the bytes of `values`.
uint64_t Hash(absl::Span<const float> values);

// What the workers of one run saw.
struct Observed {
  std::mutex mu;
  std::map<int, std::map<uint64_t, uint64_t>> seen;  // rank → version → hash
  std::map<int, std::vector<double>> losses;         // rank → per-step loss
};

// Runs every worker of `config` in its own thread against `cluster`;
// returns the trainers (for their final parameters) once all succeeded
// (fails the test otherwise).
std::vector<std::unique_ptr<Trainer>> TrainAll(const JobConfig& config,
                                               LocalCluster& cluster,
                                               Observed& observed);

// Runs every trainer's Run in a thread of its own; fails the test unless
// each succeeded.
void RunAll(const std::vector<std::unique_ptr<Trainer>>& trainers);

// Each worker took `steps` steps, and its median loss over its last 16 is
// well below the job's over its first 16 (the highest of the ranks').
void CheckLossFalls(Observed& observed, int workers, uint64_t steps);

// Trains `config` (sync), then the same job with float16 both ways: the
// float16 run goes `steps` steps in lock-step, its loss falls, and shard 0
// received and sent exactly half the bytes of the float32 run.
void CheckFloat16HalvesTheBytes(const JobConfig& config, uint64_t steps);

// Trains `calm` (sync), then the same job with 20% of replies dropped: the
// lossy run ends on the calm run's parameters bit for bit, every shard at
// version `steps` with each worker's pushes counted once.
void CheckDroppedRepliesChangeNothing(const JobConfig& calm, uint64_t steps);

// Under async or ssp after every worker finished: each shard applied every
// push (version = workers × `steps`) and saw each worker finish at `steps`.
void CheckEveryPushApplied(LocalCluster& cluster, const JobConfig& config,
                           uint64_t steps);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_CLUSTER_TRAINING_H_
