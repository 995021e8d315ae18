// UpdatePolicy: when pushed gradients reach a shard's store and when a
// pull may be served, over a live set of workers: one class for every
// policy, holding what they share — the rank table (who is live, clocks,
// exactly once, staleness counts), the initial-values gate, the waiting
// pulls, capture and replication — and asking its PolicyRule (sync, SSP,
// async: policy_rule.h) what the consistency model decides.
//
// Every rank starts live (expected). A rank leaves the live set when its
// lease expires or it says it finished; waits stop counting on it, and a
// push from it is refused with Aborted ("register again") until it joins
// again. Thread-safe plain C++ (no gRPC), tested without sockets.
#ifndef PARAMD_SERVER_POLICY_UPDATE_POLICY_H_
#define PARAMD_SERVER_POLICY_UPDATE_POLICY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/base/cancellation.h"
#include "common/config/job_config.h"
#include "common/metrics/histogram.h"
#include "server/policy/policy_rule.h"
#include "server/policy/rank_table.h"
#include "server/store/shard_store.h"

namespace paramd {

class UpdatePolicy final {
 public:
  static constexpr uint64_t kJoinSlack = 2;

  // `store` must outlive the policy; `rule` decides over its ranks.
  UpdatePolicy(int num_workers, ShardStore* store,
               std::unique_ptr<PolicyRule> rule);

  const char* name() const { return rule_->name(); }

  // The clock `rank` could (re)join at now; changes nothing.
  uint64_t ProposeClock(int rank) ABSL_LOCKS_EXCLUDED(mu_);
  // (Re)joins `rank` to the live set at `clock` (a ProposeClock answer, or
  // larger). Aborted when the policy has moved past `clock` meanwhile;
  // InvalidArgument when `clock` is more than kJoinSlack beyond every clock
  // this shard knows (no shard proposes that).
  absl::Status Join(int rank, uint64_t clock) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops `rank` from the live set; waits no longer count on it.
  void Leave(int rank) ABSL_LOCKS_EXCLUDED(mu_);

  // Accepts `rank`'s gradient computed at `clock`. grads[local] is the
  // gradient of the store's chunk `local`, already checked for size and
  // finiteness. On error nothing is applied or kept.
  //
  // Exactly once: a push of the (rank, clock) this policy accepted last
  // from `rank` is a retry (its reply was lost): OK, nothing applied
  // again, `*duplicate` (when not null) set. A rank's accepted clocks only
  // grow, so only its last push can be retried; it stays recognised when
  // the rank joins again past it, and across a checkpoint and restore.
  //
  // `rows` are gradients of embedding-table rows this shard owns (at most
  // one entry per table, ids distinct), applied in the same step as the
  // chunks: summed and averaged with the round's under sync, at once
  // otherwise. A push that would take a table past its max_rows is
  // refused (RESOURCE_EXHAUSTED, naming table and shard).
  //
  // `skip` (guard.on_diverge: skip_push): the push is accepted — its clock
  // counts, a retry of it is a duplicate — but its gradient is not
  // applied: under sync the round's mean is over the other pushes, and a
  // round whose every push was skipped moves the version on without a
  // step.
  //
  // `times`, unless null, receives where the optimizer step this push
  // made went (StepTimes::taken: under sync only the push that completes
  // its round makes one).
  absl::Status Push(int rank, uint64_t clock,
                    absl::Span<const absl::Span<const float>> grads,
                    absl::Span<const RowGrads> rows = {},
                    bool* duplicate = nullptr, bool skip = false,
                    StepTimes* times = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Part of `rank`'s push at `clock`: its gradient of the chunks `locals`
  // (grads by local index, as Push's; only those in `locals` are read) — a
  // push in slices, whose chunks may be stepped and read (WhenReadable
  // with chunks) before the rest of it comes. Policy sync only
  // (FailedPrecondition elsewhere). A chunk of the push already in is
  // skipped (`*duplicate` when all were); the push counts as accepted —
  // exactly once, as Push's — when its last chunk is in (`*complete`).
  // Errors as Push's; on error nothing of this call is kept.
  absl::Status PushChunks(int rank, uint64_t clock,
                          absl::Span<const int> locals,
                          absl::Span<const absl::Span<const float>> grads,
                          bool* complete, bool* duplicate)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a push of (rank, clock) would be acknowledged as a retry of
  // the one accepted last from `rank` (Push's exactly-once rule).
  bool IsRetry(int rank, uint64_t clock) ABSL_LOCKS_EXCLUDED(mu_);
  // The staleness tau of `rank`'s last accepted push (0 before one): the
  // step timeline's, read after that push.
  uint64_t LastStaleness(int rank) ABSL_LOCKS_EXCLUDED(mu_);

  // The store's first values come from a worker (model.initial_values:
  // rank0): until Initialize, no pull may read it and pushes are refused.
  // Called before serving; Restore ends the wait (a checkpoint holds
  // values).
  void AwaitInitialValues() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether it still waits (a checkpoint now would hold no real state).
  bool AwaitingInitialValues() ABSL_LOCKS_EXCLUDED(mu_);
  // The store's parameters become values[local] (each chunk's length,
  // checked) and waiting pulls go on, if AwaitInitialValues was called.
  // Once: later calls (a retry, or a rank 0 that started again) change
  // nothing and set `*applied` false. The caller refuses jobs that do not
  // wait for initial values.
  absl::Status Initialize(absl::Span<const absl::Span<const float>> values,
                          bool* applied) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until a worker `rank` at `clock` may read the store: a waiter
  // as WhenReadable's, this thread waiting on it. Returns DeadlineExceeded
  // at `deadline` (nothing changed; the caller may wait again; the message
  // says what the pull waits for), Cancelled as soon as `cancel` (when
  // given) is cancelled, and Unavailable once Shutdown was called.
  // `waiting`, when given, runs once (on this thread) if it must wait.
  // With `own_pushes` (a read of a table with policy async) it waits for
  // `rank`'s own pushes up to clock - 1 only, not for the job's policy.
  absl::Status WaitReadable(int rank, uint64_t clock, absl::Time deadline,
                            Cancellation* cancel = nullptr,
                            const std::function<void()>& waiting = nullptr,
                            bool own_pushes = false) ABSL_LOCKS_EXCLUDED(mu_);

  // As WaitReadable without a thread waiting: `ready` runs once, with OK
  // once a pull of `rank` at `clock` may read the store, or Unavailable
  // once Shutdown was called — here at once when that is so already, else
  // on the thread whose Push, Join, Leave, Restore or Shutdown made it so,
  // after the policy's lock is released. Returns an id for
  // CancelWhenReadable (0 when `ready` ran here).
  uint64_t WhenReadable(int rank, uint64_t clock,
                        std::function<void(absl::Status)> ready)
      ABSL_LOCKS_EXCLUDED(mu_);
  // As WhenReadable for a read of the chunks `locals` only: under sync
  // they may be read at version t+1 once the round stepped them, before
  // it is over (ShardStore::SnapshotAt(clock) then holds them).
  uint64_t WhenChunksReadable(int rank, uint64_t clock, std::vector<int> locals,
                              std::function<void(absl::Status)> ready)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes waiter `id` out: returns its `ready`, which the policy will
  // never run now (the caller may, with its own status), or null when it
  // ran or is running.
  std::function<void(absl::Status)> CancelWhenReadable(uint64_t id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // What a pull by `rank` at `clock` waits for now, e.g. "ranks 1, 3 to
  // push clock 7"; empty when it may proceed.
  std::string WaitingOn(int rank, uint64_t clock) ABSL_LOCKS_EXCLUDED(mu_);
  // The ranks that pull waits for now: those that must push (`rank` itself
  // when it waits for its own push), 0 while rank 0's initial values are
  // awaited; empty when it may proceed.
  std::vector<int> AwaitedRanks(int rank, uint64_t clock)
      ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<PolicyWorker> Workers() ABSL_LOCKS_EXCLUDED(mu_);

  // `rank` was served the store at `version` (a pull's snapshot): its next
  // push is a gradient of that version. Lock-free.
  void NotePulled(int rank, uint64_t version);
  // Staleness tau of every accepted push: the store's version after the
  // push's step minus the version its rank last pulled (1 for a gradient
  // of the newest version, and for a rank not seen pulling). Under sync
  // every push of a round is of the round's version: 1 (a late push that
  // backup workers drop counts with its own).
  const Histogram& push_staleness() const { return push_staleness_; }
  // Bounds of push_staleness's buckets.
  static std::vector<double> StalenessBuckets();

  // Wakes every waiter with Unavailable; later calls fail at once.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // The state now, store included, consistent with one version: a sync
  // round still open is left out (its pushes count as not received, so
  // their retries are applied after a restore), also when a round in
  // slices has stepped some chunks already (ShardStore::SaveState saves
  // the version before it).
  PolicyState Capture() ABSL_LOCKS_EXCLUDED(mu_);
  // From now on, Push captures the state whenever the store reaches a
  // multiple of `n` versions; TakeCaptured hands the newest over once.
  void CaptureEvery(uint64_t n) ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<PolicyState> TakeCaptured() ABSL_LOCKS_EXCLUDED(mu_);
  // Incremental checkpoints (checkpoint.full_every): while a base is set,
  // the captures CaptureEvery makes are incremental — the store's changes
  // since the durable full capture at `version`, whose table clocks were
  // `table_clocks` (the store forgets the rows dropped before them).
  // Without one (the default, and after a Restore) they are full.
  struct CaptureBase {
    uint64_t version = 0;
    std::vector<int64_t> table_clocks;
  };
  void SetCaptureBase(std::optional<CaptureBase> base) ABSL_LOCKS_EXCLUDED(mu_);
  // replication: `sink` receives the state after every step (and after
  // Initialize), under the policy's lock, before the push that made it is
  // acknowledged or any pull reads it. When the sink fails, so does that
  // push, and the policy shuts down (every waiter and later call gets
  // Unavailable): the shard was replaced, and nothing it holds may be
  // served. Set before serving.
  using StepSink = std::function<absl::Status(PolicyState)>;
  void SetStepSink(StepSink sink) ABSL_LOCKS_EXCLUDED(mu_);
  // Hands the state now to the sink, under the lock (a backup that was
  // away catching up); as a step's failure, an error shuts the policy down.
  absl::Status SendState() ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the store's and the policy's state with a captured one (before
  // serving). Until the first push after it, a rank may join at a clock
  // past every clock this shard knows: the shard was restored from an
  // older checkpoint and moves on to the job's clock (the versions in
  // between are lost here).
  absl::Status Restore(const PolicyState& state) ABSL_LOCKS_EXCLUDED(mu_);

  // For tests: waits up to `timeout` until `rank` has reached `clock` and
  // its liveness is `live`; false on timeout.
  bool TEST_AwaitWorker(int rank, uint64_t clock, bool live,
                        absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // For tests: waits up to `timeout` until `n` WaitReadable calls are
  // blocked (found the store not yet readable and wait); false on timeout.
  bool TEST_AwaitBlocked(int n, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct ReadyWaiter {
    uint64_t id;
    int rank;
    uint64_t clock;
    std::function<void(absl::Status)> ready;
    std::vector<int> chunks;  // A read of these only (WhenChunksReadable).
    bool own_pushes = false;  // Waits for its rank's pushes only.
  };
  // Adds a waiter unless it may go on now (then runs `ready` here).
  uint64_t AddWaiter(ReadyWaiter waiter) ABSL_LOCKS_EXCLUDED(mu_);
  class Mutation;
  // The waiters that may go on now (all of them after Shutdown), taken out
  // of ready_waiters_.
  std::vector<ReadyWaiter> TakeReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // With `incremental` and a capture base, the store's changes since the
  // base (ShardStore::SaveChanges) instead of its whole state.
  PolicyState CaptureLocked(bool incremental = false) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What Push and PushChunks do once the rule accepted a push (`dropped`:
  // acknowledged, not applied): its staleness counted, the rank pushes
  // clock + 1 next and this push is its last, and the state is captured or
  // sent on when the store moved past `before`.
  absl::Status Accepted(int rank, uint64_t clock, uint64_t staleness,
                        bool dropped, uint64_t before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Push's and PushChunks' checks before the rule's: `*duplicate` when
  // the push is the rank's last accepted (OK, nothing more to do); its
  // staleness.
  absl::Status CheckPush(int rank, uint64_t clock, bool* duplicate,
                         uint64_t* staleness)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether `rank` at `clock` may read (the chunks `locals` only, when not
  // empty): once the store has its initial values, as the rule says — or,
  // with `own_pushes`, once the rank's pushes before `clock` are in.
  bool CanRead(int rank, uint64_t clock, absl::Span<const int> locals = {},
               bool own_pushes = false) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (awaiting_initial_) return false;
    if (own_pushes) return ranks_[rank].clock >= clock;
    return rule_->Readable(ranks_, rank, clock, locals);
  }
  // What a pull that may not read waits for.
  std::string WaitsFor(int rank, uint64_t clock) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_workers_;
  ShardStore* const store_;

  // By rank: the version its last pull was served, kNotPulled before one.
  static constexpr uint64_t kNotPulled = UINT64_MAX;
  const std::unique_ptr<std::atomic<uint64_t>[]> pulled_;
  Histogram push_staleness_{StalenessBuckets()};

  // Held while the store (and its row tables) take their own locks, never
  // the other way round (docs/architecture.md, "Locks and their order").
  absl::Mutex mu_;
  // The consistency model; called with mu_ held only.
  const std::unique_ptr<PolicyRule> rule_ ABSL_PT_GUARDED_BY(mu_);
  RankTable ranks_ ABSL_GUARDED_BY(mu_);
  // WhenReadable's waiters, in arrival order.
  std::vector<ReadyWaiter> ready_waiters_ ABSL_GUARDED_BY(mu_);
  // AwaitInitialValues until Initialize (or Restore).
  bool awaiting_initial_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t capture_every_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t captured_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<PolicyState> captured_ ABSL_GUARDED_BY(mu_);
  std::optional<CaptureBase> capture_base_ ABSL_GUARDED_BY(mu_);
  bool restored_ ABSL_GUARDED_BY(mu_) = false;  // No push since Restore.
  StepSink step_sink_ ABSL_GUARDED_BY(mu_);
  // Hands CaptureLocked() to step_sink_ (if set); on error, shuts down.
  absl::Status SendStateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;  // WaitReadable calls waiting now.
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_UPDATE_POLICY_H_
