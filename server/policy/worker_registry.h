// WorkerRegistry: what one shard knows of each worker rank besides the
// policy's clocks — whether it registered or finished, when it was last
// heard from, its traffic and last loss. Thread-safe.
#ifndef PARAMD_SERVER_POLICY_WORKER_REGISTRY_H_
#define PARAMD_SERVER_POLICY_WORKER_REGISTRY_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paramd {

struct WorkerInfo {
  bool registered = false;
  bool finished = false;
  absl::Time last_seen = absl::InfinitePast();       // Any request.
  absl::Time last_push = absl::InfinitePast();       // An applied push.
  absl::Time last_heartbeat = absl::InfinitePast();  // A heartbeat.
  uint64_t registrations = 0;  // Distinct incarnations that joined.
  uint64_t incarnation = 0;
  uint64_t pushes = 0;
  uint64_t pulls = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  float last_loss = 0;
};

class WorkerRegistry {
 public:
  explicit WorkerRegistry(int num_workers);

  // Each records word from `rank`, in [0, num_workers), at `now`.
  void OnRegister(int rank, uint64_t incarnation, absl::Time now);
  void OnSeen(int rank, absl::Time now);
  void OnHeartbeat(int rank, absl::Time now);
  // Whether `rank` has registered (joined) with this shard.
  bool IsRegistered(int rank) const;
  // A push's or pull's bytes; with `whole` false a slice's (PushRequest.
  // slices): its bytes count, the push or pull counts with its last.
  void OnPush(int rank, uint64_t bytes, float loss, absl::Time now,
              bool whole = true);
  void OnPull(int rank, uint64_t bytes, absl::Time now, bool whole = true);
  void OnFinished(int rank, absl::Time now);

  // When the first worker registered (the job's start), if one has.
  absl::Time job_start() const;

  std::vector<WorkerInfo> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  absl::Time job_start_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_WORKER_REGISTRY_H_
