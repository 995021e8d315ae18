// ReplicaFence: how a shard's replica asks its fence
// (common/coord/shard_fence.h; server/replication/shard_replica.h says
// what the answers make of it): the starting primary's claim, waiting out
// an earlier run of its own; the backup's takeover, asked of the
// coordinator no more often than kClaimEvery however many workers knock;
// and whether a step may be acknowledged.
//
// Thread-safe; mu_ is a leaf.
#ifndef PARAMD_SERVER_REPLICATION_REPLICA_FENCE_H_
#define PARAMD_SERVER_REPLICATION_REPLICA_FENCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/coord/shard_fence.h"
#include "server/replication/primary_link.h"

namespace paramd {

class ReplicaFence {
 public:
  // How often a backup asks the coordinator to take the shard over.
  static constexpr absl::Duration kClaimEvery = absl::Milliseconds(100);

  // Shard `shard`'s `fence`, whose leases last `lease`; `clock` outlives
  // this.
  ReplicaFence(int shard, std::unique_ptr<ShardFence> fence,
               absl::Duration lease, Clock* clock)
      : shard_(shard), fence_(std::move(fence)), lease_(lease), clock_(clock) {}

  ShardFence* fence() const { return fence_.get(); }

  // The starting primary at `own_address`: the claim once settled — won,
  // or held by another (its term and address). One held at this address
  // is an earlier run's: waited out (its lease ends within one), for up to
  // three leases; FAILED_PRECONDITION after that. The coordinator's error
  // when it cannot be asked.
  absl::StatusOr<ShardFence::Claim> ClaimAtStart(
      const std::string& own_address);
  // The backup, asked by a worker's call: the term it serves at when the
  // claim is won; else UNAVAILABLE saying why. Between two asks of the
  // coordinator, the last answer.
  absl::StatusOr<int64_t> TakeOver() ABSL_LOCKS_EXCLUDED(mu_);
  // The primary: OK when a step may be acknowledged now — `link`'s mark of
  // the backup is written, and the lease is live; UNAVAILABLE saying why
  // not.
  absl::Status VouchForStep(PrimaryLink& link) const;

 private:
  const int shard_;
  const std::unique_ptr<ShardFence> fence_;
  const absl::Duration lease_;
  Clock* const clock_;
  absl::Mutex mu_;
  absl::Time last_claim_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string last_why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_REPLICATION_REPLICA_FENCE_H_
