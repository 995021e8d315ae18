// ShardFence: which process may acknowledge a replicated shard's pushes,
// as the job's coordinator (coordination.etcd) decides it — one at a
// time, under any partition (docs/operations.md, "Coordination on etcd").
//
// A shard is held by claiming its key under the claimer's lease; the term
// of a holder is the revision that created its key, so every later holder
// has a greater one. The holder records in the coordinator whether its
// backup holds every step it acknowledged (MarkBackup): a backup takes the
// shard over only when no one holds it and the last holder said so. A
// holder acknowledges only while Holds(): its lease is live. Once the
// lease is lost the process never holds the shard again (Lost()).
//
// ShardReplica (server/replication/shard_replica.h) asks it; the etcd
// implementation is common/coord/rpc/etcd_shard_fence.h. Thread-safe.
#ifndef PARAMD_COMMON_COORD_SHARD_FENCE_H_
#define PARAMD_COMMON_COORD_SHARD_FENCE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace paramd {

class ShardFence {
 public:
  // What a claim found.
  struct Claim {
    bool won = false;
    // Won: this process's term. Not won: the holder's (0 when no one
    // holds the shard).
    int64_t term = 0;
    // Not won: the holder's address ("" when no one holds the shard), and
    // why the claim was not taken.
    std::string holder;
    std::string why;
  };

  virtual ~ShardFence() = default;

  // The shard's configured primary, starting: claims the shard when no
  // one holds it. Its backup is "behind" from then on until MarkBackup.
  virtual absl::StatusOr<Claim> ClaimPrimary() = 0;
  // The backup: claims the shard when no one holds it and its last holder
  // marked this backup in sync.
  virtual absl::StatusOr<Claim> TakeOver() = 0;
  // Whether this process may acknowledge a push now: it won a claim and
  // its lease is live.
  virtual bool Holds() const = 0;
  // Why this process will never hold the shard again (its lease was
  // lost); OK while it may.
  virtual absl::Status Lost() const = 0;
  // The holder says whether its backup holds every step acknowledged:
  // OK once the coordinator has it; FAILED_PRECONDITION when this process
  // no longer holds the shard.
  virtual absl::Status MarkBackup(bool in_sync) = 0;
  // Where the coordinator is, for messages ("etcd [ENDPOINTS]").
  virtual std::string Describe() const = 0;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_SHARD_FENCE_H_
