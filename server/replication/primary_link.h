// PrimaryLink: the primary's side of its link to the backup
// (server/replication/shard_replica.h says the protocol): whether the
// backup holds every acknowledged step, when it last answered and when it
// last heard this process, when a backup left behind is tried again — and
// the sending that keeps that true. ShardReplica decides what to send and
// when (after a step, a catch-up, a keep-alive); the link sends it and
// says what became of it.
//
// Thread-safe; mu_ is a leaf (ShardReplica's lock order: the policy's
// lock, then this one; nothing is called with it held).
#ifndef PARAMD_SERVER_REPLICATION_PRIMARY_LINK_H_
#define PARAMD_SERVER_REPLICATION_PRIMARY_LINK_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/coord/shard_fence.h"
#include "proto/paramd.pb.h"
#include "server/replication/replica_peer.h"

namespace paramd {

// How long a call to the peer (a step's Replicate, a Handover) waits
// before it counts as unanswered.
absl::Duration ReplicaCallTimeout(absl::Duration lease);

class PrimaryLink {
 public:
  // What became of a Replicate.
  enum class Sent {
    kAnswered,    // The peer took it.
    kLeftBehind,  // No answer: the primary goes on alone, the backup is
                  // caught up later.
    kReplaced,    // The peer serves the shard at a newer term.
    kInDoubt,     // No answer, and the backup, in sync, has not heard this
                  // process for a lease: it may have taken over.
    kSlow,        // The backup, in sync, reached but not answering in time
                  // (DEADLINE_EXCEEDED): worth one more try before it is
                  // left behind (only when `retry_slow`).
  };
  // What the backup is owed at a tick.
  enum class Due { kNothing, kCatchUp, kKeepAlive };

  // Shard `shard`'s link over `peer` (both it and `clock` outlive the
  // link); `replaced` runs, with no lock of the link's held, when this
  // process learns it no longer serves the shard (the peer serves it at a
  // newer term, or may have taken over).
  PrimaryLink(int shard, absl::Duration lease, Clock* clock, PeerSlot* peer,
              std::function<void()> replaced)
      : shard_(shard),
        lease_(lease),
        clock_(clock),
        peer_(peer),
        replaced_(std::move(replaced)) {}

  // Before serving, with coordination.etcd: the shard's fence (outlives
  // the link). A backup out of touch is then never in doubt — it takes
  // over only when the fence says it holds every acknowledged step — so
  // the primary goes on without it, once the fence records it behind
  // (SyncFence).
  void set_fence(ShardFence* fence) { fence_ = fence; }
  // Brings the fence's mark of the backup to whether it is in sync now.
  // OK when a step may be acknowledged: the fence does not say "in sync"
  // of a backup that is behind (a failed mark of one in sync is only
  // logged: the fence then still says "behind", which takes nothing).
  absl::Status SyncFence() ABSL_LOCKS_EXCLUDED(mu_, mark_mu_);

  // Sends `request` (`version`: the state's, 0 for a keep-alive).
  Sent Send(std::shared_ptr<const proto::ReplicateRequest> request,
            uint64_t version, bool retry_slow = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `request` until it is settled: slow, once more (a backup on a
  // loaded host that misses one deadline may meet the next; one that
  // is gone refuses at once, UNAVAILABLE, and is not waited for again);
  // in doubt, once more (the peer's answer, or its refusal, settles it);
  // still in doubt, this process gives up the shard as if replaced. OK
  // when the step may be acknowledged; UNAVAILABLE saying why not.
  absl::Status SendSettled(
      std::shared_ptr<const proto::ReplicateRequest> request, uint64_t version)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A step made `version`: whether to send it now. A backup a try found
  // behind is tried again by the ticks only, not by a step: one whose host
  // is gone would cost the step, under the policy's lock, the call's
  // timeout at every try. Until a try fails, steps send.
  bool StepSends(uint64_t version) ABSL_LOCKS_EXCLUDED(mu_);
  // What the backup is owed at `now`: a catch-up (behind, and its retry is
  // due), a keep-alive (in sync, and nothing sent for lease / 4), or
  // nothing.
  Due DueAt(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);
  // A catch-up's keep-alive was `answered`: steps send to the backup again
  // (the whole state first); else it is tried again a while later.
  void CatchUpAnswered(bool answered) ABSL_LOCKS_EXCLUDED(mu_);
  // A new backup (a peer that started anew): caught up by the next tick.
  void NewPeer() ABSL_LOCKS_EXCLUDED(mu_);
  // This process serves the shard from `version` on (it took over): its
  // backup is caught up at the next tick.
  void StartServing(uint64_t version) ABSL_LOCKS_EXCLUDED(mu_);

  // The primary's fields of a status: in sync, lag, the backup's silence.
  void FillStatus(proto::ReplicaStatus* status) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Sent::kLeftBehind, logged, for a failed send of `version`.
  Sent LeftBehind(uint64_t version, const absl::Status& s, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int shard_;
  const absl::Duration lease_;
  Clock* const clock_;
  PeerSlot* const peer_;
  const std::function<void()> replaced_;
  ShardFence* fence_ = nullptr;  // Set before serving.

  // Held across a mark's call to the fence, so that marks are written in
  // the order of the states they read.
  absl::Mutex mark_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  bool marked_in_sync_ ABSL_GUARDED_BY(mark_mu_) = false;

  mutable absl::Mutex mu_;
  // Whether the backup holds every acknowledged step, when it last
  // answered, when a behind backup is tried next, and the versions applied
  // and sent.
  bool in_sync_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time peer_answered_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // When the newest Replicate the backup answered was sent: the backup
  // heard this process at or after it, so it cannot take over before
  // contact_ + lease.
  absl::Time contact_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_sent_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_try_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t applied_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t sent_version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_REPLICATION_PRIMARY_LINK_H_
