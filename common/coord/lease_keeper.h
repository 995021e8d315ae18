// LeaseKeeper: an etcd lease this process holds, kept alive, and whether
// the process may still act on what the lease holds (a shard's primary
// key, say) — the fence of coordination on etcd.
//
// The lease is live until the time its last answered renewal was sent
// plus the TTL etcd answered. etcd counts that TTL from when it received
// the renewal, which is later, and a new etcd leader only extends a lease
// (it renews every lease in full when it takes office); so this process
// stops counting the lease live no later than etcd expires it and can
// give its keys to another — as long as this process's clock runs no
// slower than etcd's (rates, not readings: the two are never compared). A
// holder that asks Live() before each acknowledgement never acknowledges
// after another can hold the key.
//
// Renewals are due every third of the TTL, counted from the last one
// sent; a failed one is tried again at the next Tick. Live() is false
// from the moment the live time passes; a renewal sent before then and
// answered after it makes it live again (etcd had the lease when the
// renewal reached it, and keeps it for the TTL from then). The lease is
// lost — for good: the process must take a new lease and claim its keys
// again — when a Tick finds its live time passed, or etcd answers that it
// expired.
//
// Thread-safe: Tick from one thread (a ticker), Live and the rest from any.
#ifndef PARAMD_COMMON_COORD_LEASE_KEEPER_H_
#define PARAMD_COMMON_COORD_LEASE_KEEPER_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"

namespace paramd {

class LeaseKeeper {
 public:
  // One renewal of `lease`: the TTL etcd answers (EtcdClient::KeepAlive),
  // NOT_FOUND once etcd no longer has the lease.
  using Renew = std::function<absl::StatusOr<absl::Duration>(int64_t lease)>;

  // `lease`, granted for `ttl` by a grant sent at `sent` (read from
  // `clock` before the grant was asked). `clock` outlives the keeper.
  LeaseKeeper(int64_t lease, absl::Duration ttl, absl::Time sent, Renew renew,
              Clock* clock);

  // Renews the lease when due, or at once when `now` (OK when nothing was
  // due): the renewal's error when it failed; FAILED_PRECONDITION saying
  // why once the lease is lost.
  absl::Status Tick(bool now = false) ABSL_LOCKS_EXCLUDED(mu_);
  // When Tick next has a renewal to send.
  absl::Time NextDue() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether the process may act on the lease now.
  bool Live() const ABSL_LOCKS_EXCLUDED(mu_);
  // Until when it may, as of the last answered renewal.
  absl::Time live_until() const ABSL_LOCKS_EXCLUDED(mu_);
  // Why the lease is lost; OK while it is not (it may still not be live).
  absl::Status lost() const ABSL_LOCKS_EXCLUDED(mu_);

  int64_t lease() const { return lease_; }
  absl::Duration ttl() const { return ttl_; }

 private:
  // Marks the lease lost (the first reason stays) when its live time has
  // passed at `now`.
  void CheckExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t lease_;
  const absl::Duration ttl_;
  const Renew renew_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::Time live_until_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sent_ ABSL_GUARDED_BY(mu_);
  bool retry_now_ ABSL_GUARDED_BY(mu_) = false;  // The last renewal failed.
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_LEASE_KEEPER_H_
