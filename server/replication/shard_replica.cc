#include "server/replication/shard_replica.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/shard/proto_convert.h"
#include "server/shard/request_checks.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

// How long a step waits for the backup before going on without it.
absl::Duration SendTimeout(absl::Duration lease) {
  return std::clamp(lease / 4, absl::Milliseconds(200), absl::Seconds(2));
}

// How soon a backup that did not answer is tried again.
constexpr absl::Duration kRetryEvery = absl::Seconds(1);

std::shared_ptr<const proto::ReplicateRequest> Shared(
    proto::ReplicateRequest request) {
  return std::make_shared<const proto::ReplicateRequest>(std::move(request));
}

}  // namespace

ShardReplica::ShardReplica(const JobConfig& config, int shard,
                           uint64_t plan_fingerprint, bool backup, Clock* clock,
                           UpdatePolicy* policy, WorkerRegistry* workers,
                           JobMetrics* metrics)
    : config_(config),
      shard_(shard),
      plan_fingerprint_(plan_fingerprint),
      lease_(absl::Seconds(config.liveness.lease_seconds)),
      clock_(clock),
      policy_(policy),
      workers_(workers),
      metrics_(metrics),
      peer_(shard),
      role_(backup ? Role::kBackup : Role::kPrimary),
      heard_(clock->Now()) {}

const char* ShardReplica::RoleName(Role role) {
  switch (role) {
    case Role::kPrimary:
      return "primary";
    case Role::kBackup:
      return "backup";
    case Role::kTakingOver:
      return "taking over";
    case Role::kReplaced:
      return "replaced";
  }
  return "?";
}

absl::Status ShardReplica::Named(absl::StatusCode code,
                                 const std::string& what) const {
  return absl::Status(code, absl::StrCat("shard ", shard_, ": ", what));
}

absl::Status ShardReplica::Named(const absl::Status& s) const {
  return s.ok() ? s : Named(s.code(), std::string(s.message()));
}

absl::Status ShardReplica::CheckCaller(const char* rpc,
                                       const std::string& job_id,
                                       uint32_t shard,
                                       const std::string& launch) const {
  return Named(
      CheckPeerCall(rpc, {job_id, shard, launch},
                    {config_.job_id, static_cast<uint32_t>(shard_), launch_}));
}

void ShardReplica::SetPeer(Connect connect, std::string own_address,
                           std::string peer_address) {
  own_address_ = std::move(own_address);
  peer_.Set(std::move(connect), std::move(peer_address));
}

absl::Status ShardReplica::Start() {
  proto::HandoverRequest ask;
  ask.set_job_id(config_.job_id);
  ask.set_shard(shard_);
  ask.set_launch(launch_);
  ask.set_sender(own_address_);
  proto::HandoverResponse answer;
  const std::shared_ptr<ReplicaPeer> peer = Peer();
  const absl::Status s =
      peer == nullptr ? absl::UnavailableError("its address is not known yet")
                      : peer->Handover(ask, SendTimeout(lease_), &answer);
  if (s.ok() && (answer.role() == RoleName(Role::kPrimary) ||
                 answer.role() == RoleName(Role::kTakingOver))) {
    // The peer took over while this process was away: back it up.
    absl::MutexLock lock(&mu_);
    term_ = std::max(term_, answer.term());
    heard_ = clock_->Now();
    role_.store(Role::kBackup, std::memory_order_release);
    spdlog::info(
        "shard {}: {} serves the shard (term {}); this process is "
        "its backup",
        shard_, PeerAddress(), answer.term());
    return absl::OkStatus();
  }
  if (role() == Role::kBackup) return absl::OkStatus();
  if (s.ok() && answer.role() == RoleName(Role::kBackup) && answer.has_held()) {
    // The backup holds what this process acknowledged before it stopped.
    RETURN_IF_ERROR(Check(answer.held()));
    RETURN_IF_ERROR(Install(answer.held()));
    absl::MutexLock lock(&mu_);
    term_ = std::max(term_, answer.term());
    spdlog::info(
        "shard {}: took the state of version {} from the backup at "
        "{} (term {})",
        shard_, answer.held().version(), PeerAddress(), term_);
  } else if (!s.ok()) {
    spdlog::info(
        "shard {}: the backup at {} does not answer yet ({}); "
        "serving without it until it does",
        shard_, PeerAddress(), std::string(s.message()));
  }
  policy_->SetStepSink(
      [this](PolicyState state) { return OnStep(std::move(state)); });
  // The backup gets the state it starts from (best effort).
  return policy_->SendState();
}

proto::ReplicateRequest ShardReplica::MakeRequest(PolicyState* state) const {
  proto::ReplicateRequest request;
  request.set_job_id(config_.job_id);
  request.set_shard(shard_);
  request.set_launch(launch_);
  request.set_sender(own_address_);
  {
    absl::MutexLock lock(&mu_);
    request.set_term(term_);
  }
  if (state != nullptr) {
    FillReplicaState(plan_fingerprint_, policy_->name(), state, *workers_,
                     metrics_->SaveState(), request.mutable_state());
  }
  return request;
}

ShardReplica::Sent ShardReplica::Send(
    std::shared_ptr<const proto::ReplicateRequest> request, uint64_t version,
    bool retry_slow) {
  proto::ReplicateResponse response;
  const std::shared_ptr<ReplicaPeer> peer = Peer();
  const absl::Time start = clock_->Now();
  const absl::Status s =
      peer == nullptr
          ? absl::UnavailableError("its address is not known yet")
          : peer->Replicate(request, SendTimeout(lease_), &response);
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  last_sent_ = now;
  if (s.ok()) {
    peer_answered_ = now;
    contact_ = std::max(contact_, start);
    if (request->has_state()) {
      if (!in_sync_) {
        spdlog::info("shard {}: the backup at {} holds version {}: in sync",
                     shard_, PeerAddress(), version);
      }
      in_sync_ = true;
      sent_version_ = version;
    }
    return Sent::kAnswered;
  }
  if (absl::IsFailedPrecondition(s)) {
    BecomeReplaced();
    spdlog::error(
        "shard {}: replaced: {} serves the shard now ({}); this process "
        "serves nothing more",
        shard_, PeerAddress(), std::string(s.message()));
    return Sent::kReplaced;
  }
  if (in_sync_ && now - contact_ >= lease_) {
    // This process was silent for a lease (paused, or starved) while its
    // backup was alive and held every step: the backup may have taken
    // over without the step in hand. Going on alone would acknowledge
    // what the serving replica never sees.
    spdlog::warn(
        "shard {}: the backup at {} did not take version {} ({}), and has "
        "not heard this process for {} (liveness.lease_seconds {}): it may "
        "have taken over",
        shard_, PeerAddress(), version, std::string(s.message()),
        absl::FormatDuration(now - contact_), absl::FormatDuration(lease_));
    return Sent::kInDoubt;
  }
  if (in_sync_ && retry_slow && absl::IsDeadlineExceeded(s)) {
    // Sending the same state again is safe: the backup takes a version it
    // holds again, and answers which it holds.
    spdlog::info(
        "shard {}: the backup at {} did not answer version {} within {}; "
        "sending it once more",
        shard_, PeerAddress(), version,
        absl::FormatDuration(SendTimeout(lease_)));
    return Sent::kSlow;
  }
  if (in_sync_) {
    spdlog::warn(
        "shard {}: the backup at {} did not take version {} ({}); steps are "
        "acknowledged without it until it answers again",
        shard_, PeerAddress(), version, std::string(s.message()));
  }
  in_sync_ = false;
  next_try_ = now + kRetryEvery;
  return Sent::kLeftBehind;
}

void ShardReplica::BecomeReplaced() {
  role_.store(Role::kReplaced, std::memory_order_release);
  if (on_replaced_ && !told_replaced_.exchange(true)) on_replaced_();
}

absl::Status ShardReplica::SendSettled(
    std::shared_ptr<const proto::ReplicateRequest> request, uint64_t version) {
  Sent sent = Send(request, version, /*retry_slow=*/true);
  if (sent == Sent::kSlow) sent = Send(request, version);
  if (sent == Sent::kInDoubt) sent = Send(request, version);
  if (sent == Sent::kInDoubt) {
    BecomeReplaced();
    spdlog::error(
        "shard {}: out of touch with its backup at {} for longer than "
        "liveness.lease_seconds: it may serve the shard now, so this "
        "process serves nothing more (started again, it asks its peer "
        "which of them serves)",
        shard_, PeerAddress());
  }
  if (sent == Sent::kReplaced || sent == Sent::kInDoubt) {
    return Named(absl::StatusCode::kUnavailable,
                 absl::StrCat("this server was replaced by its backup at ",
                              PeerAddress(), "; ask it"));
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::OnStep(PolicyState state) {
  if (role() != Role::kPrimary) {
    return Named(absl::StatusCode::kUnavailable,
                 "this server no longer serves the shard");
  }
  {
    absl::MutexLock lock(&mu_);
    applied_version_ = std::max(applied_version_, state.version);
    // A backup a try found behind (next_try_ set) is tried again by Tick
    // only, not by a step: one whose host is gone would cost the step,
    // under the policy's lock, the call's timeout at every try. Until a
    // try fails, steps send.
    if (!in_sync_ && next_try_ != absl::InfinitePast()) {
      return absl::OkStatus();
    }
  }
  const uint64_t version = state.version;
  return SendSettled(Shared(MakeRequest(&state)), version);
}

void ShardReplica::Tick() {
  if (role() == Role::kReplaced && !stopped_.exchange(true)) {
    // Its waiting pulls end with UNAVAILABLE; the workers move on.
    policy_->Shutdown();
  }
  if (role() != Role::kPrimary) return;
  bool catch_up = false, keep_alive = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    catch_up = !in_sync_ && now >= next_try_;
    keep_alive = in_sync_ && now - last_sent_ >= lease_ / 4;
  }
  if (catch_up) {
    // A keep-alive first, with no lock held: a backup that is down or
    // hangs costs the ticker its timeout, not the steps. Then the whole
    // state, under the policy's lock, so no step passes it unsent.
    const bool answered =
        Send(Shared(MakeRequest(nullptr)), 0) == Sent::kAnswered;
    if (answered && role() == Role::kPrimary) {
      {
        // It answers: steps send to it again, this one first.
        absl::MutexLock lock(&mu_);
        next_try_ = absl::InfinitePast();
      }
      (void)policy_->SendState();
    } else {
      absl::MutexLock lock(&mu_);
      next_try_ = clock_->Now() + kRetryEvery;
    }
  } else if (keep_alive) {
    // Replaced or in doubt: the next Tick shuts the policy down.
    (void)SendSettled(Shared(MakeRequest(nullptr)), 0);
  }
}

absl::Status ShardReplica::Check(const proto::ReplicaState& state) const {
  return Named(CheckReplicaState(state, plan_fingerprint_, policy_->name(),
                                 config_.num_workers));
}

absl::Status ShardReplica::Replicate(proto::ReplicateRequest* in,
                                     proto::ReplicateResponse* response) {
  const proto::ReplicateRequest& request = *in;
  RETURN_IF_ERROR(CheckCaller("Replicate", request.job_id(), request.shard(),
                              request.launch()));
  if (request.has_state()) RETURN_IF_ERROR(Check(request.state()));
  peer_.Learn(request.sender());
  absl::MutexLock lock(&mu_);
  response->set_term(term_);
  const Role now_role = role();
  if (now_role == Role::kReplaced) {
    return Named(absl::StatusCode::kUnavailable,
                 "Replicate: this replica was replaced and stops");
  }
  if (now_role != Role::kBackup && request.term() <= term_) {
    // Serving the shard (or taking it over): the sender is the stale one.
    return Named(absl::StatusCode::kFailedPrecondition,
                 absl::StrCat("Replicate: this replica serves the shard at "
                              "term ",
                              term_, "; the sender (term ", request.term(),
                              ") was replaced"));
  }
  if (now_role != Role::kBackup) {
    // A newer primary: this one was away past its lease and replaced. Tick
    // ends its waiting pulls; the sender goes on without a backup until
    // this process is started again, as the backup.
    BecomeReplaced();
    spdlog::error(
        "shard {}: replaced: the backup at {} serves the shard at "
        "term {}; this process serves nothing more",
        shard_, PeerAddress(), request.term());
    return Named(absl::StatusCode::kUnavailable,
                 "Replicate: this replica was replaced and stops");
  }
  if (request.term() < term_) {
    return Named(absl::StatusCode::kFailedPrecondition,
                 absl::StrCat("Replicate: term ", request.term(),
                              " is older than this replica's ", term_));
  }
  term_ = request.term();
  heard_ = clock_->Now();
  if (request.has_state() &&
      (!held_.has_value() || request.state().version() >= held_->version())) {
    held_.emplace();
    held_->Swap(in->mutable_state());
  }
  response->set_version(held_.has_value() ? held_->version() : 0);
  return absl::OkStatus();
}

absl::Status ShardReplica::Handover(const proto::HandoverRequest& request,
                                    proto::HandoverResponse* response) {
  RETURN_IF_ERROR(CheckCaller("Handover", request.job_id(), request.shard(),
                              request.launch()));
  // A replica starting asks first: when this one serves, the asker is its
  // backup from now on, wherever it listens now (restarted on another
  // port or node); otherwise its address is learnt only when none is set.
  if (role() == Role::kPrimary || role() == Role::kTakingOver) {
    if (peer_.Adopt(request.sender())) {
      // Caught up by the next Tick with the whole state.
      absl::MutexLock lock(&mu_);
      in_sync_ = false;
      next_try_ = absl::InfinitePast();
    }
  } else {
    peer_.Learn(request.sender());
  }
  absl::MutexLock lock(&mu_);
  response->set_role(RoleName(role()));
  response->set_term(term_);
  if (role() == Role::kBackup && held_.has_value()) {
    *response->mutable_held() = *held_;
    // The asker serves from this state now; this process backs it up.
    heard_ = clock_->Now();
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::Admit(const char* rpc) {
  const Role now_role = role();
  if (now_role == Role::kPrimary) return absl::OkStatus();
  if (now_role == Role::kReplaced) {
    return Named(absl::StatusCode::kUnavailable,
                 absl::StrCat(rpc,
                              ": this server was replaced by its backup "
                              "at ",
                              PeerAddress(), "; ask it"));
  }
  absl::MutexLock take_over(&take_over_mu_);
  if (role() == Role::kPrimary) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    const absl::Duration silent = clock_->Now() - heard_;
    if (silent <= lease_) {
      return Named(absl::StatusCode::kUnavailable,
                   absl::StrCat(rpc,
                                ": this is the shard's backup; its "
                                "primary at ",
                                PeerAddress(), " was heard from ",
                                absl::FormatDuration(silent),
                                " ago (it takes over after "
                                "liveness.lease_seconds of silence)"));
    }
    if (!held_.has_value()) {
      return Named(absl::StatusCode::kUnavailable,
                   absl::StrCat(rpc,
                                ": this is the shard's backup and it "
                                "holds no state of the primary at ",
                                PeerAddress(), " yet"));
    }
    // From here a Replicate of the old primary is refused as stale.
    role_.store(Role::kTakingOver, std::memory_order_release);
  }
  return TakeOver();
}

absl::Status ShardReplica::TakeOver() {
  proto::ReplicaState held;
  absl::Duration silent;
  {
    absl::MutexLock lock(&mu_);
    held = *held_;
    silent = clock_->Now() - heard_;
  }
  if (absl::Status s = Install(held); !s.ok()) {
    role_.store(Role::kBackup, std::memory_order_release);
    return s;
  }
  uint64_t term = 0;
  {
    absl::MutexLock lock(&mu_);
    term = ++term_;
    ++takeovers_;
    in_sync_ = false;
    next_try_ = clock_->Now();
    applied_version_ = held.version();
    sent_version_ = 0;
    held_.reset();
  }
  policy_->SetStepSink(
      [this](PolicyState state) { return OnStep(std::move(state)); });
  role_.store(Role::kPrimary, std::memory_order_release);
  spdlog::warn(
      "shard {}: took over from the primary at {} (silent for {}) at "
      "version {}, term {}",
      shard_, PeerAddress(), absl::FormatDuration(silent), held.version(),
      term);
  return absl::OkStatus();
}

absl::Status ShardReplica::Install(const proto::ReplicaState& held) {
  if (absl::Status s = policy_->Restore(ToPolicyState(held)); !s.ok()) {
    return Named(
        s.code(),
        absl::StrCat("the primary's state does not install: ", s.message()));
  }
  RETURN_IF_ERROR(metrics_->RestoreState(held.metrics_state()));
  const absl::Time now = clock_->Now();
  for (int r = 0; r < config_.num_workers; ++r) {
    if (held.registered(r)) workers_->OnRegister(r, 0, now);
    if (!held.live(r)) policy_->Leave(r);
  }
  return absl::OkStatus();
}

void ShardReplica::FillStatus(proto::ReplicaStatus* status) const {
  absl::MutexLock lock(&mu_);
  const Role r = role();
  status->set_role(RoleName(r));
  status->set_term(term_);
  status->set_peer(PeerAddress());
  status->set_takeovers(takeovers_);
  const absl::Time now = clock_->Now();
  if (r == Role::kPrimary) {
    status->set_peer_in_sync(in_sync_);
    status->set_lag_versions(in_sync_ ? 0 : applied_version_ - sent_version_);
    status->set_peer_silent_seconds(
        peer_answered_ == absl::InfinitePast()
            ? -1
            : absl::ToDoubleSeconds(now - peer_answered_));
  } else {
    status->set_held_version(held_.has_value() ? held_->version() : 0);
    status->set_peer_silent_seconds(absl::ToDoubleSeconds(now - heard_));
  }
}

}  // namespace paramd
