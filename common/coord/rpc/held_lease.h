// HeldLease: an etcd lease that a thread of its own keeps alive
// (LeaseKeeper's rules: renewed when due, live until the last answered
// renewal's sending plus the TTL), and — where its owner allows — taken
// anew when lost, with what the owner writes under it written again. The
// part that registering a member (member_registration.h) and fencing a
// shard (etcd_shard_fence.h) share.
//
// Thread-safe. The hooks run with no lock of this class held, on the
// starting thread (the first grant) or the keeper's thread.
#ifndef PARAMD_COMMON_COORD_RPC_HELD_LEASE_H_
#define PARAMD_COMMON_COORD_RPC_HELD_LEASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/coord/lease_keeper.h"
#include "common/coord/rpc/etcd_client.h"

namespace paramd {

class HeldLease {
 public:
  struct Hooks {
    // After each lease granted, the first included: what the owner writes
    // under it. An error revokes that lease and fails the grant.
    std::function<absl::Status(int64_t lease)> granted;
    // Whether a lost lease may be replaced by a new one; when not, the
    // thread ends (the owner's keys went with the old one for good).
    std::function<bool()> may_replace;
    // Runs after a lost lease was replaced (for the owner's log).
    std::function<void()> replaced;
    // Names the lease in the thread's warnings.
    std::string what;
  };

  // A lease of `ttl` from `client` (which outlives this), granted before
  // this returns (etcd's error otherwise), then kept by a thread.
  static absl::StatusOr<std::unique_ptr<HeldLease>> Start(EtcdClient* client,
                                                          absl::Duration ttl,
                                                          Hooks hooks);
  // Stops the thread. The lease is not revoked: the owner decides.
  ~HeldLease();
  HeldLease(const HeldLease&) = delete;
  HeldLease& operator=(const HeldLease&) = delete;

  // The keeper of the lease held now.
  std::shared_ptr<LeaseKeeper> keeper() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t lease() const { return keeper()->lease(); }
  // Renews the lease when due, or at once when `now` (the thread does
  // when due); its Tick's answer. A lost lease is taken anew when the
  // owner allows (Hooks::may_replace).
  absl::Status Renew(bool now = false) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  HeldLease(EtcdClient* client, absl::Duration ttl, Hooks hooks)
      : client_(client), ttl_(ttl), hooks_(std::move(hooks)) {}
  // A new lease, the owner's writes under it, and its keeper.
  absl::Status Grant() ABSL_LOCKS_EXCLUDED(mu_);
  void Run();  // The thread.

  EtcdClient* const client_;
  const absl::Duration ttl_;
  const Hooks hooks_;
  mutable absl::Mutex mu_;
  std::shared_ptr<LeaseKeeper> keeper_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_RPC_HELD_LEASE_H_
