// PullWaiters: the pulls a shard holds waiting now, so that the stall
// inspector can warn about the ones waiting too long (with back-off) and
// the status RPC can list them with what they wait for. Thread-safe.
#ifndef PARAMD_SERVER_POLICY_PULL_WAITERS_H_
#define PARAMD_SERVER_POLICY_PULL_WAITERS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paramd {

class PullWaiters {
 public:
  struct Waiter {
    int rank = 0;
    uint64_t clock = 0;
    absl::Time since;
    int warnings = 0;  // Times TakeDue returned it.
  };

  // Records a pull of `rank` at `clock` waiting since `since`; returns its
  // id for Remove.
  uint64_t Add(int rank, uint64_t clock, absl::Time since);
  void Remove(uint64_t id);

  // The waiters due a warning at `now`: those that have waited longer than
  // `after` * 2^k, k the times they were returned before (so each comes
  // back after `after`, 2x, 4x, ... of waiting); returned with k + 1.
  std::vector<Waiter> TakeDue(absl::Time now, absl::Duration after);
  // Every waiter, oldest first.
  std::vector<Waiter> List() const;

  // For tests: waits up to `timeout` until `n` pulls are waiting.
  bool TEST_AwaitCount(size_t n, absl::Duration timeout);

 private:
  mutable absl::Mutex mu_;
  std::map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_PULL_WAITERS_H_
