// StallInspector: a shard's watch over the pulls it holds waiting (a sync
// round, an SSP bound, a rank's own push, rank 0's initial values). A pull
// that has waited longer than liveness.stall_warn_seconds is a stall: one
// log line names the ranks it waits for and what each last did (its last
// pushed clock, how long ago it pushed and sent a heartbeat), repeated
// after 2x, 4x, 8x, ... that time while it lasts. Status lists every
// waiting pull with the ranks it waits for and whether it is stalled, and
// marks the ranks that hold a stalled pull. Thread-safe.
#ifndef PARAMD_SERVER_STATS_STALL_INSPECTOR_H_
#define PARAMD_SERVER_STATS_STALL_INSPECTOR_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/paramd.pb.h"
#include "server/policy/pull_waiters.h"
#include "server/policy/update_policy.h"
#include "server/policy/worker_registry.h"

namespace paramd {

class StallInspector {
 public:
  // Every pointer must outlive the inspector.
  StallInspector(int shard, absl::Duration stall_warn, PullWaiters* waiters,
                 UpdatePolicy* policy, const WorkerRegistry* workers);

  // Logs the stalls due a warning at `now` (Shard::Tick calls it); returns
  // the lines logged.
  std::vector<std::string> Check(absl::Time now);

  // The waiting pulls (ShardStatus.waiting), the stall fields of each
  // rank's row (WorkerStatus.stalling; the rows must be filled) and the
  // warnings logged so far.
  void FillStatus(absl::Time now, proto::ShardStatus* status) const;

 private:
  // "rank 1: live, last pushed clock 41 12.0s ago, last heartbeat 11.8s
  // ago" for each rank in `ranks`.
  std::string LastDone(const std::vector<int>& ranks, absl::Time now) const;

  const int shard_;
  const absl::Duration stall_warn_;
  PullWaiters* const waiters_;
  UpdatePolicy* const policy_;
  const WorkerRegistry* const workers_;
  std::atomic<uint64_t> warnings_{0};
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STATS_STALL_INSPECTOR_H_
