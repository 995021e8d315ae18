// UpdatePolicy: a shard's consistency rule — when pushed gradients reach
// the store and when a pull may be served. Implementations are thread-safe
// plain C++ (no gRPC) and are tested without sockets.
#ifndef PARAMD_SERVER_UPDATE_POLICY_H_
#define PARAMD_SERVER_UPDATE_POLICY_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/job_config.h"
#include "server/shard_store.h"

namespace paramd {

class UpdatePolicy {
 public:
  virtual ~UpdatePolicy() = default;

  virtual const char* name() const = 0;

  // A worker (re)registers; returns the clock it continues from.
  virtual uint64_t OnRegister(int rank) = 0;

  // Accepts `rank`'s gradient computed at `clock`. grads[local] is the
  // gradient of the store's chunk `local`, already checked for size and
  // finiteness. On error nothing is applied or kept.
  virtual absl::Status Push(int rank, uint64_t clock,
                            absl::Span<const absl::Span<const float>> grads) = 0;

  // Blocks until a worker `rank` at `clock` may read the store. Returns
  // DeadlineExceeded at `deadline` (nothing changed; the caller may wait
  // again) and Unavailable once Shutdown was called.
  virtual absl::Status WaitReadable(int rank, uint64_t clock,
                                    absl::Time deadline) = 0;

  // Wakes every waiter with Unavailable; later waits fail at once.
  virtual void Shutdown() = 0;
};

// The policy `config` names, over `store`, which must outlive it.
std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const PolicyConfig& config,
                                               int num_workers,
                                               ShardStore* store);

}  // namespace paramd

#endif  // PARAMD_SERVER_UPDATE_POLICY_H_
