// ShardReplica: one process's part in keeping a shard on two servers
// (replication.factor 2; docs/operations.md, "Replicas").
//
// Protocol: primary–backup, with the primary's whole state shipped after
// every step (and before a registration or an epoch report is
// acknowledged: Shard). The primary hands the policy's capture after each
// step (a
// checkpoint's bytes, with each rank's liveness and registration) to the
// backup through a ReplicaPeer, under the policy's lock, before the push
// is acknowledged or any pull reads the new version: an acknowledged
// update is on both servers. A backup that does not answer (refuses the
// call, or misses its deadline twice: a slow backup is given a second
// try) is left behind (the primary goes on alone, "not in sync") and
// caught up with the whole state once it answers again (Tick) — but only
// while the backup cannot have taken over: when the backup, in sync, has
// not heard this process for a lease (it was paused), an unanswered step
// is sent once more and, still unanswered, the primary gives the shard up
// as if replaced. The primary sends a keep-alive at least every lease / 4.
//
// The backup serves nothing until it takes over: a worker's call reaching
// it when the primary has been silent for longer than liveness.lease_seconds
// makes it install its newest state and serve, at term + 1. A primary that
// was only paused learns it was replaced at its next step or keep-alive
// (the backup refuses an older term), fails that step and serves nothing
// more (replaced(): paramd-server exits, and a restart rejoins as the
// backup: Start asks the peer first).
//
// With coordination.etcd, a ShardFence (common/coord/shard_fence.h)
// decides instead of silence: the starting primary claims the shard (a
// previous run's claim at the same address is waited out; another's makes
// this process the backup), the backup takes over only by the fence's
// claim (no one holds the shard, and its holder marked the backup in
// sync), and the term is the claim's. The primary acknowledges a step only
// after the fence says whether the backup is in sync and only while its
// lease is live; a step it cannot so acknowledge, or a lost lease, gives
// the shard up (replaced). A backup out of touch is then never in doubt:
// the primary goes on without it once the fence records it behind.
//
// Lock order: take_over_mu_ (taking over), then the policy's lock, then
// mu_ or the primary link's (server/replication/primary_link.h), each a
// leaf: the policy calls OnStep with its lock held, the peer's Replicate
// takes only mu_, and nothing here calls the policy, the peer or the link
// with mu_ held.
#ifndef PARAMD_SERVER_REPLICATION_SHARD_REPLICA_H_
#define PARAMD_SERVER_REPLICATION_SHARD_REPLICA_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "common/coord/shard_fence.h"
#include "proto/paramd.pb.h"
#include "server/policy/update_policy.h"
#include "server/policy/worker_registry.h"
#include "server/replication/ack_journal.h"
#include "server/replication/primary_link.h"
#include "server/replication/replica_fence.h"
#include "server/replication/replica_peer.h"
#include "server/stats/job_metrics.h"

namespace paramd {

class ShardReplica {
 public:
  enum class Role { kPrimary, kBackup, kTakingOver, kReplaced };

  // Shard `shard` of `config`, starting as the backup when `backup`.
  // `clock`, `policy`, `workers` and `metrics` (the shard's) outlive this.
  ShardReplica(const JobConfig& config, int shard, uint64_t plan_fingerprint,
               bool backup, Clock* clock, UpdatePolicy* policy,
               WorkerRegistry* workers, JobMetrics* metrics);

  // How to reach a peer at an address.
  using Connect = PeerSlot::Connect;

  // Before serving: how to reach the peer, this replica's own address (as
  // the peer reaches it: sent with every call, so that a peer started
  // without knowing it learns it) and the peer's (empty: unknown until the
  // peer calls, e.g. a backup started before its primary had a port).
  // Then Start, which asks the peer what it is (when it answers): a
  // starting primary whose peer
  // serves the shard becomes its backup; one whose peer is a backup
  // holding a state installs that state (the peer holds every step this
  // process acknowledged before it died). Then the primary sends its state.
  void SetPeer(Connect connect, std::string own_address,
               std::string peer_address);
  // The launch both replicas serve (RegisterRequest.launch); set before
  // serving.
  void set_launch(std::string launch) { launch_ = std::move(launch); }
  // Until it returns OK, every worker's call is refused (Admit).
  absl::Status Start();
  // Set before Start: every step acknowledged is written to `journal`.
  void set_ack_journal(std::unique_ptr<AckJournal> journal) {
    journal_ = std::move(journal);
  }
  // Set before Start, with coordination.etcd: the shard's fence.
  void set_fence(std::unique_ptr<ShardFence> fence);
  // Set before Start: runs once, on the thread that learnt it (under the
  // replica's locks: it must only signal), when this process gives up the
  // shard (replaced() turns true).
  void set_on_replaced(std::function<void()> on_replaced) {
    on_replaced_ = std::move(on_replaced);
  }

  // Whether a worker's call `rpc` may be served here: OK on the primary;
  // a backup whose primary has been silent for longer than the lease
  // takes over first; else UNAVAILABLE saying why (the worker tries the
  // other replica).
  absl::Status Admit(const char* rpc);
  // The policy's step sink (UpdatePolicy::SetStepSink).
  absl::Status OnStep(PolicyState state);
  // Periodic: the primary's keep-alive, and catching a backup up.
  void Tick();

  // ReplicaService, as the peer calls it (the held state is moved out of
  // `request`).
  absl::Status Replicate(proto::ReplicateRequest* request,
                         proto::ReplicateResponse* response);
  absl::Status Handover(const proto::HandoverRequest& request,
                        proto::HandoverResponse* response);

  Role role() const { return role_.load(std::memory_order_acquire); }
  bool replaced() const { return role() == Role::kReplaced; }
  static const char* RoleName(Role role);
  void FillStatus(proto::ReplicaStatus* status) const;

 private:
  // The request carrying `state` (null: a keep-alive).
  proto::ReplicateRequest MakeRequest(PolicyState* state) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // INVALID_ARGUMENT naming what a Replicate's (or a Handover answer's)
  // state has that this shard's has not.
  absl::Status Check(const proto::ReplicaState& state) const;
  // Serves the shard from the held state, at `fenced_term` (the fence's
  // claim) or, unfenced, at the next term.
  absl::Status TakeOver(int64_t fenced_term)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(take_over_mu_);
  // Start's work: the role this process starts in.
  absl::Status TakeRole();
  // Fenced: the starting primary's claim; whether it won (else this
  // process is the backup).
  absl::StatusOr<bool> ClaimAtStart();
  // UNAVAILABLE: the backup cannot serve `rpc`, holding no state yet.
  absl::Status NoStateYet(const char* rpc) const;
  // Fenced: the backup's takeover by the fence's claim.
  absl::Status AdmitFenced(const char* rpc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(take_over_mu_);
  // Fenced: OK when a step may be acknowledged now; else the shard is
  // given up.
  absl::Status CheckFence();
  // The role becomes kReplaced; tells on_replaced_ the first time.
  void BecomeReplaced();
  // Makes `held` the shard's state: the policy's, the epoch reports, the
  // registrations (leases start over from now) and the live set.
  absl::Status Install(const proto::ReplicaState& held);
  absl::Status Named(absl::StatusCode code, const std::string& what) const;
  // `s` with this shard named, when not OK.
  absl::Status Named(const absl::Status& s) const;
  // INVALID_ARGUMENT unless a call `rpc` names this job, shard and launch.
  absl::Status CheckCaller(const char* rpc, const std::string& job_id,
                           uint32_t shard, const std::string& launch) const;

  const JobConfig& config_;
  const int shard_;
  const uint64_t plan_fingerprint_;
  const absl::Duration lease_;
  Clock* const clock_;
  UpdatePolicy* const policy_;
  WorkerRegistry* const workers_;
  JobMetrics* const metrics_;
  // The peer as this replica reaches it now (peer_).
  std::shared_ptr<ReplicaPeer> Peer() const { return peer_.Get(); }
  std::string PeerAddress() const { return peer_.Address(); }

  std::string own_address_;
  PeerSlot peer_;
  // The primary's link to the backup (sending, in sync, caught up).
  PrimaryLink link_;
  std::string launch_;

  std::atomic<Role> role_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};  // Replaced, and the policy shut down.
  std::function<void()> on_replaced_;
  std::atomic<bool> told_replaced_{false};
  std::unique_ptr<ReplicaFence> fence_;  // Set before Start.
  std::unique_ptr<AckJournal> journal_;  // Set before Start.
  absl::Mutex take_over_mu_;
  mutable absl::Mutex mu_;
  uint64_t term_ ABSL_GUARDED_BY(mu_) = 1;
  // Backup: the newest state, when the primary was last heard from.
  std::optional<proto::ReplicaState> held_ ABSL_GUARDED_BY(mu_);
  absl::Time heard_ ABSL_GUARDED_BY(mu_);
  uint64_t takeovers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_REPLICATION_SHARD_REPLICA_H_
