// CallLimiter: how many pushes and pulls each rank has inside a shard at
// once, bounded by limits.max_inflight_per_worker so that one worker (a
// bug, a retry storm) cannot hold every handler thread. Thread-safe.
#ifndef PARAMD_SERVER_GUARDS_CALL_LIMITER_H_
#define PARAMD_SERVER_GUARDS_CALL_LIMITER_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace paramd {

class CallLimiter {
 public:
  // `limit` calls at once for each of `num_workers` ranks, on shard `shard`
  // (named in refusals).
  CallLimiter(int num_workers, int limit, int shard);

  // Counts one more call of `rank`, or refuses it (RESOURCE_EXHAUSTED,
  // naming `rpc`, the rank and the setting) at the limit; a counted call
  // calls Leave when it ends.
  absl::Status Enter(const char* rpc, int rank) ABSL_LOCKS_EXCLUDED(mu_);
  void Leave(int rank) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int limit_;
  const int shard_;
  absl::Mutex mu_;  // A leaf: nothing is taken under it.
  std::vector<int> inside_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_GUARDS_CALL_LIMITER_H_
