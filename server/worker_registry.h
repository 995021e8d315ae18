// WorkerRegistry: what one shard knows of each worker rank — registered or
// not, its clock, traffic counters and when it was last heard from.
// Thread-safe.
#ifndef PARAMD_SERVER_WORKER_REGISTRY_H_
#define PARAMD_SERVER_WORKER_REGISTRY_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paramd {

struct WorkerInfo {
  bool registered = false;
  uint64_t clock = 0;
  uint64_t pushes = 0;
  uint64_t pulls = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  absl::Time last_seen = absl::InfinitePast();
};

class WorkerRegistry {
 public:
  explicit WorkerRegistry(int num_workers);

  // Each records traffic from `rank`, which must be in [0, num_workers).
  void OnRegister(int rank, uint64_t clock, absl::Time now);
  void OnPush(int rank, uint64_t new_clock, uint64_t bytes, absl::Time now);
  void OnPull(int rank, uint64_t bytes, absl::Time now);
  void OnHeartbeat(int rank, absl::Time now);

  std::vector<WorkerInfo> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_WORKER_REGISTRY_H_
