// LeaseWatch: a shard's watch over its workers' leases
// (liveness.lease_seconds): a live rank not heard from for longer than the
// lease — counted from the job's start for a rank never heard from — is
// dropped from the policy's live set, with one log line, so that rounds
// and bounds stop waiting for it. Shard::Tick runs it.
//
// Thread-compatible: one ticker calls Check.
#ifndef PARAMD_SERVER_GUARDS_LEASE_WATCH_H_
#define PARAMD_SERVER_GUARDS_LEASE_WATCH_H_

#include "absl/time/time.h"
#include "server/policy/update_policy.h"
#include "server/policy/worker_registry.h"

namespace paramd {

class LeaseWatch {
 public:
  // Both pointers must outlive the watch.
  LeaseWatch(int shard, double lease_seconds, UpdatePolicy* policy,
             const WorkerRegistry* workers)
      : shard_(shard),
        lease_seconds_(lease_seconds),
        policy_(policy),
        workers_(workers) {}

  // Drops the ranks whose lease expired by `now`.
  void Check(absl::Time now);

 private:
  const int shard_;
  const double lease_seconds_;
  UpdatePolicy* const policy_;
  const WorkerRegistry* const workers_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_GUARDS_LEASE_WATCH_H_
