#include "server/policy/update_policy.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"

namespace paramd {

// Holds the policy's lock for a call that may make pulls readable; on the
// way out it takes the waiters it made ready, releases the lock, then runs
// them (so a waiter may call back into the policy).
class UpdatePolicy::Mutation {
 public:
  explicit Mutation(UpdatePolicy* policy) : policy_(policy) {
    policy_->mu_.Lock();
  }
  ~Mutation() {
    std::vector<ReadyWaiter> fired = policy_->TakeReady();
    const bool shutdown = policy_->shutdown_;
    policy_->mu_.Unlock();
    for (ReadyWaiter& w : fired) {
      w.ready(shutdown ? absl::UnavailableError("the shard is shutting down")
                       : absl::OkStatus());
    }
  }

 private:
  UpdatePolicy* const policy_;
};

UpdatePolicy::UpdatePolicy(int num_workers, ShardStore* store,
                           std::unique_ptr<PolicyRule> rule)
    : num_workers_(num_workers),
      store_(store),
      pulled_(new std::atomic<uint64_t>[num_workers]),
      rule_(std::move(rule)),
      ranks_(num_workers) {
  for (int r = 0; r < num_workers; ++r) pulled_[r].store(kNotPulled);
}

std::vector<double> UpdatePolicy::StalenessBuckets() {
  return {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128};
}

void UpdatePolicy::NotePulled(int rank, uint64_t version) {
  if (rank >= 0 && rank < num_workers_) {
    pulled_[rank].store(version, std::memory_order_relaxed);
  }
}

uint64_t UpdatePolicy::ProposeClock(int rank) {
  absl::MutexLock lock(&mu_);
  return rule_->JoinClock(ranks_, rank);
}

absl::Status UpdatePolicy::Join(int rank, uint64_t clock) {
  Mutation lock(this);
  // Every shard's proposal is within a step of this shard's clocks (a
  // worker's push of a step reaches every shard before its next step), so
  // a clock beyond that came from no proposal: refused, or the rank would
  // drop out of every round until it got there.
  const uint64_t largest =
      std::max(rule_->JoinClock(ranks_, rank), ranks_.Largest());
  if (restored_ && clock > largest) {
    rule_->CatchUp(clock);
  } else if (clock > largest + kJoinSlack) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Register: rank ", rank, " asks to join at clock ", clock,
        ", beyond any clock a shard proposes (this shard's largest is ",
        largest, "); register without join for a proposal"));
  }
  RETURN_IF_ERROR(rule_->Admit(ranks_, rank, clock));
  ranks_.Join(rank, clock);
  rule_->MembersChanged(ranks_);
  return absl::OkStatus();
}

void UpdatePolicy::Leave(int rank) {
  Mutation lock(this);
  if (ranks_.Leave(rank)) rule_->MembersChanged(ranks_);
}

absl::Status UpdatePolicy::CheckPush(int rank, uint64_t clock, bool* duplicate,
                                     uint64_t* staleness) {
  *duplicate = false;
  if (shutdown_) return absl::UnavailableError("the shard is shutting down");
  if (rank < 0 || rank >= num_workers_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Push: rank ", rank, " is outside [0, ", num_workers_, ")"));
  }
  if (ranks_.IsLastAccepted(rank, clock)) {
    *duplicate = true;
    return absl::OkStatus();
  }
  if (awaiting_initial_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Push: rank ", rank, " pushed clock ", clock,
        " before the shard "
        "has rank 0's initial values (model.initial_values: rank0)"));
  }
  if (!ranks_[rank].live) {
    return absl::AbortedError(absl::StrCat(
        "Push: rank ", rank,
        " was dropped from the live set (lease expired or finished); "
        "register again"));
  }
  // The versions this push's step moves the store past the one it pulled
  // (a shard restored to an older version may be behind it: fresh).
  const uint64_t pulled = pulled_[rank].load(std::memory_order_relaxed);
  const uint64_t version = store_->version();
  *staleness =
      pulled == kNotPulled || pulled > version ? 1 : version - pulled + 1;
  return absl::OkStatus();
}

absl::Status UpdatePolicy::Push(int rank, uint64_t clock,
                                absl::Span<const absl::Span<const float>> grads,
                                absl::Span<const RowGrads> rows,
                                bool* duplicate, bool skip, StepTimes* times) {
  Mutation lock(this);
  bool retry = false;
  uint64_t staleness = 0;
  absl::Status checked = CheckPush(rank, clock, &retry, &staleness);
  if (duplicate != nullptr) *duplicate = retry;
  if (!checked.ok() || retry) return checked;
  const uint64_t before = store_->version();
  bool dropped = false;
  RETURN_IF_ERROR(rule_->Accept(
      ranks_, RulePush{rank, clock, staleness, grads, rows, skip, times},
      &dropped));
  return Accepted(rank, clock, staleness, dropped, before);
}

absl::Status UpdatePolicy::PushChunks(
    int rank, uint64_t clock, absl::Span<const int> locals,
    absl::Span<const absl::Span<const float>> grads, bool* complete,
    bool* duplicate) {
  Mutation lock(this);
  *complete = false;
  uint64_t staleness = 0;
  RETURN_IF_ERROR(CheckPush(rank, clock, duplicate, &staleness));
  if (*duplicate) {
    *complete = true;
    return absl::OkStatus();
  }
  const uint64_t before = store_->version();
  RulePush push{rank, clock, staleness, grads};
  RETURN_IF_ERROR(
      rule_->AcceptChunks(ranks_, push, locals, complete, duplicate));
  if (!*complete) return absl::OkStatus();
  return Accepted(rank, clock, staleness, /*dropped=*/false, before);
}

absl::Status UpdatePolicy::Accepted(int rank, uint64_t clock,
                                    uint64_t staleness, bool dropped,
                                    uint64_t before) {
  push_staleness_.Observe(static_cast<double>(staleness));
  ranks_.Accepted(rank, clock, staleness, dropped);
  restored_ = false;
  const uint64_t after = store_->version();
  if (capture_every_ > 0 && after != captured_version_ &&
      after % capture_every_ == 0) {
    captured_ = CaptureLocked(/*incremental=*/true);
    captured_version_ = after;
  }
  if (after != before) return SendStateLocked();
  return absl::OkStatus();
}

void UpdatePolicy::SetStepSink(StepSink sink) {
  absl::MutexLock lock(&mu_);
  step_sink_ = std::move(sink);
}

absl::Status UpdatePolicy::SendState() {
  Mutation lock(this);
  if (shutdown_) return absl::UnavailableError("the shard is shutting down");
  return SendStateLocked();
}

absl::Status UpdatePolicy::SendStateLocked() {
  // Before rank 0's initial values the state is not the job's yet.
  if (!step_sink_ || awaiting_initial_) return absl::OkStatus();
  absl::Status s = step_sink_(CaptureLocked());
  // Replaced: the pulls this step made ready, and every later call, fail.
  if (!s.ok()) shutdown_ = true;
  return s;
}

bool UpdatePolicy::IsRetry(int rank, uint64_t clock) {
  if (rank < 0 || rank >= num_workers_) return false;
  absl::MutexLock lock(&mu_);
  return ranks_.IsLastAccepted(rank, clock);
}

uint64_t UpdatePolicy::LastStaleness(int rank) {
  if (rank < 0 || rank >= num_workers_) return 0;
  absl::MutexLock lock(&mu_);
  return ranks_[rank].last_staleness;
}

PolicyState UpdatePolicy::CaptureLocked(bool incremental) const {
  const absl::Time began = absl::Now();
  PolicyState state;
  state.version = store_->version();
  ranks_.Save(&state);
  state.table_clocks = store_->TableClocks();
  if (incremental && capture_base_) {
    state.incremental = true;
    state.base_version = capture_base_->version;
    state.saved =
        store_->SaveChanges(capture_base_->table_clocks, &state.store_changes);
  } else {
    state.saved = store_->SaveState(&state.store_state);
  }
  rule_->AdjustCapture(&state);
  state.held = absl::Now() - began;
  return state;
}

void UpdatePolicy::SetCaptureBase(std::optional<CaptureBase> base) {
  absl::MutexLock lock(&mu_);
  store_->HoldDropped(ShardStore::kCheckpointHolder,
                      base ? base->table_clocks : std::vector<int64_t>());
  capture_base_ = std::move(base);
}

PolicyState UpdatePolicy::Capture() {
  absl::MutexLock lock(&mu_);
  return CaptureLocked();
}

void UpdatePolicy::CaptureEvery(uint64_t n) {
  absl::MutexLock lock(&mu_);
  capture_every_ = n;
  captured_version_ = store_->version();
}

std::optional<PolicyState> UpdatePolicy::TakeCaptured() {
  absl::MutexLock lock(&mu_);
  std::optional<PolicyState> out = std::move(captured_);
  captured_.reset();
  return out;
}

absl::Status UpdatePolicy::Restore(const PolicyState& state) {
  Mutation lock(this);
  RankTable restored = ranks_;
  RETURN_IF_ERROR(restored.Restore(state));
  RETURN_IF_ERROR(store_->RestoreState(state.store_state, state.store_changes));
  // Rows dropped before the restore are not known: the next capture is
  // full.
  capture_base_.reset();
  awaiting_initial_ = false;  // The checkpoint's values are the state.
  ranks_ = std::move(restored);
  captured_version_ = store_->version();
  restored_ = true;
  rule_->Restored(state, &ranks_);
  return absl::OkStatus();
}

absl::Status UpdatePolicy::WaitReadable(int rank, uint64_t clock,
                                        absl::Time deadline,
                                        Cancellation* cancel,
                                        const std::function<void()>& waiting,
                                        bool own_pushes) {
  // One way to wait: a waiter as WhenReadable's, with this thread blocked
  // until it is told, the caller cancels, or `deadline` passes.
  struct Outcome {
    absl::Mutex mu;
    std::optional<absl::Status> status ABSL_GUARDED_BY(mu);
    bool cancelled ABSL_GUARDED_BY(mu) = false;
  };
  auto outcome = std::make_shared<Outcome>();
  ReadyWaiter waiter{0, rank, clock, [outcome](absl::Status s) {
                       absl::MutexLock lock(&outcome->mu);
                       outcome->status = std::move(s);
                     }};
  waiter.own_pushes = own_pushes;
  const uint64_t id = AddWaiter(std::move(waiter));
  if (id == 0) {
    absl::MutexLock lock(&outcome->mu);
    return *outcome->status;  // At once.
  }
  if (waiting) waiting();
  const uint64_t cancel_id =
      cancel == nullptr ? 0 : cancel->OnCancel([outcome] {
        absl::MutexLock lock(&outcome->mu);
        outcome->cancelled = true;
      });
  {
    absl::MutexLock count(&mu_);
    ++blocked_;
  }
  absl::Cleanup unblocked = [this, cancel, cancel_id] {
    if (cancel_id != 0) cancel->Forget(cancel_id);
    absl::MutexLock count(&mu_);
    --blocked_;
  };
  absl::MutexLock lock(&outcome->mu);
  auto told = [&outcome]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcome->mu) {
    return outcome->status.has_value();
  };
  auto woken = [&outcome]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outcome->mu) {
    return outcome->status.has_value() || outcome->cancelled;
  };
  // `deadline` is gRPC's, on the real clock.
  outcome->mu.AwaitWithDeadline(absl::Condition(&woken), deadline);
  if (told()) return *outcome->status;
  const bool cancelled = outcome->cancelled;
  // Taken out, the waiter never runs; else it ran or runs now, and its
  // status stands.
  outcome->mu.Unlock();
  const bool taken_out = CancelWhenReadable(id) != nullptr;
  const std::string waits_for =
      !taken_out || cancelled ? std::string()
      : own_pushes ? absl::StrCat("its own push of clock ", clock - 1)
                   : WaitingOn(rank, clock);
  outcome->mu.Lock();
  if (!taken_out) {
    outcome->mu.Await(absl::Condition(&told));
    return *outcome->status;
  }
  if (cancelled) return absl::CancelledError("Pull: the caller cancelled");
  return absl::DeadlineExceededError(absl::StrCat(
      "Pull: rank ", rank, " at clock ", clock, " waits for ", waits_for));
}

std::string UpdatePolicy::WaitsFor(int rank, uint64_t clock) const {
  return awaiting_initial_
             ? "rank 0's initial values (model.initial_values: rank0)"
             : rule_->Describe(ranks_, rank, clock);
}

bool UpdatePolicy::AwaitingInitialValues() {
  absl::MutexLock lock(&mu_);
  return awaiting_initial_;
}

void UpdatePolicy::AwaitInitialValues() {
  absl::MutexLock lock(&mu_);
  awaiting_initial_ = true;
}

absl::Status UpdatePolicy::Initialize(
    absl::Span<const absl::Span<const float>> values, bool* applied) {
  Mutation lock(this);
  *applied = false;
  if (shutdown_) return absl::UnavailableError("the shard is shutting down");
  if (!awaiting_initial_) return absl::OkStatus();
  store_->Assign(values);
  awaiting_initial_ = false;
  *applied = true;
  return SendStateLocked();
}

std::string UpdatePolicy::WaitingOn(int rank, uint64_t clock) {
  absl::MutexLock lock(&mu_);
  return CanRead(rank, clock) ? "" : WaitsFor(rank, clock);
}

std::vector<int> UpdatePolicy::AwaitedRanks(int rank, uint64_t clock) {
  absl::MutexLock lock(&mu_);
  if (CanRead(rank, clock)) return {};
  if (awaiting_initial_) return {0};
  return rule_->Awaited(ranks_, rank, clock);
}

std::vector<PolicyWorker> UpdatePolicy::Workers() {
  absl::MutexLock lock(&mu_);
  return ranks_.workers();
}

bool UpdatePolicy::TEST_AwaitWorker(int rank, uint64_t clock, bool live,
                                    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, rank, clock,
                  live]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ranks_[rank].clock >= clock && ranks_[rank].live == live;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

bool UpdatePolicy::TEST_AwaitBlocked(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return blocked_ >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

void UpdatePolicy::Shutdown() {
  Mutation lock(this);
  shutdown_ = true;
}

uint64_t UpdatePolicy::WhenReadable(int rank, uint64_t clock,
                                    std::function<void(absl::Status)> ready) {
  return AddWaiter(ReadyWaiter{0, rank, clock, std::move(ready), {}});
}

uint64_t UpdatePolicy::WhenChunksReadable(
    int rank, uint64_t clock, std::vector<int> locals,
    std::function<void(absl::Status)> ready) {
  return AddWaiter(
      ReadyWaiter{0, rank, clock, std::move(ready), std::move(locals)});
}

uint64_t UpdatePolicy::AddWaiter(ReadyWaiter waiter) {
  absl::Status now;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) {
      now = absl::UnavailableError("the shard is shutting down");
    } else if (!CanRead(waiter.rank, waiter.clock, waiter.chunks,
                        waiter.own_pushes)) {
      waiter.id = next_waiter_++;
      const uint64_t id = waiter.id;
      ready_waiters_.push_back(std::move(waiter));
      return id;
    }
  }
  waiter.ready(std::move(now));
  return 0;
}

std::function<void(absl::Status)> UpdatePolicy::CancelWhenReadable(
    uint64_t id) {
  absl::MutexLock lock(&mu_);
  for (auto it = ready_waiters_.begin(); it != ready_waiters_.end(); ++it) {
    if (it->id == id) {
      std::function<void(absl::Status)> ready = std::move(it->ready);
      ready_waiters_.erase(it);
      return ready;
    }
  }
  return nullptr;
}

std::vector<UpdatePolicy::ReadyWaiter> UpdatePolicy::TakeReady() {
  std::vector<ReadyWaiter> fired;
  if (ready_waiters_.empty()) return fired;
  std::vector<ReadyWaiter> waiting;
  for (ReadyWaiter& w : ready_waiters_) {
    if (shutdown_ || CanRead(w.rank, w.clock, w.chunks, w.own_pushes)) {
      fired.push_back(std::move(w));
    } else {
      waiting.push_back(std::move(w));
    }
  }
  ready_waiters_ = std::move(waiting);
  return fired;
}

}  // namespace paramd
