#include "server/replication/shard_replica.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/shard/proto_convert.h"
#include "server/shard/request_checks.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

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
      link_(shard, lease_, clock, &peer_, [this] { BecomeReplaced(); }),
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

void ShardReplica::set_fence(std::unique_ptr<ShardFence> fence) {
  link_.set_fence(fence.get());
  fence_ = std::make_unique<ReplicaFence>(
      shard_, std::move(fence),
      absl::Seconds(config_.coordination.lease_seconds), clock_);
}

absl::StatusOr<bool> ShardReplica::ClaimAtStart() {
  ASSIGN_OR_RETURN(const ShardFence::Claim claim,
                   fence_->ClaimAtStart(own_address_));
  absl::MutexLock lock(&mu_);
  if (claim.won) {
    term_ = static_cast<uint64_t>(claim.term);
    spdlog::info("shard {}: holds the shard at term {} ({})", shard_, term_,
                 fence_->fence()->Describe());
    return true;
  }
  term_ = std::max(term_, static_cast<uint64_t>(claim.term));
  heard_ = clock_->Now();
  spdlog::info("shard {}: {}; this process is its backup", shard_, claim.why);
  return false;
}

absl::Status ShardReplica::Start() {
  RETURN_IF_ERROR(TakeRole());
  started_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status ShardReplica::TakeRole() {
  if (fence_ != nullptr && role() == Role::kPrimary) {
    ASSIGN_OR_RETURN(const bool won, ClaimAtStart());
    if (!won) role_.store(Role::kBackup, std::memory_order_release);
  }
  // Fenced, a claim won is the answer: a peer saying it serves was cut off
  // from etcd for a lease and acknowledges nothing more.
  const bool claimed = fence_ != nullptr && role() == Role::kPrimary;
  proto::HandoverRequest ask;
  ask.set_job_id(config_.job_id);
  ask.set_shard(shard_);
  ask.set_launch(launch_);
  ask.set_sender(own_address_);
  proto::HandoverResponse answer;
  const std::shared_ptr<ReplicaPeer> peer = Peer();
  const absl::Status s =
      peer == nullptr
          ? absl::UnavailableError("its address is not known yet")
          : peer->Handover(ask, ReplicaCallTimeout(lease_), &answer);
  if (s.ok() && !claimed &&
      (answer.role() == RoleName(Role::kPrimary) ||
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

void ShardReplica::BecomeReplaced() {
  role_.store(Role::kReplaced, std::memory_order_release);
  if (on_replaced_ && !told_replaced_.exchange(true)) on_replaced_();
}

absl::Status ShardReplica::OnStep(PolicyState state) {
  if (role() != Role::kPrimary) {
    return Named(absl::StatusCode::kUnavailable,
                 "this server no longer serves the shard");
  }
  const uint64_t version = state.version;
  if (link_.StepSends(version)) {
    RETURN_IF_ERROR(
        Named(link_.SendSettled(Shared(MakeRequest(&state)), version)));
  }
  if (fence_ != nullptr) RETURN_IF_ERROR(CheckFence());
  if (journal_ != nullptr) {
    uint64_t term = 0;
    {
      absl::MutexLock lock(&mu_);
      term = term_;
    }
    journal_->Record(term, version);
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::CheckFence() {
  const absl::Status s = fence_->VouchForStep(link_);
  if (s.ok()) return s;
  // Applied here but not acknowledged: a worker's retry must not find it
  // done on a server that can no longer vouch for it.
  BecomeReplaced();
  spdlog::error("shard {}: gives the shard up: {}", shard_,
                std::string(s.message()));
  return Named(absl::StatusCode::kUnavailable,
               absl::StrCat("this server gave the shard up (", s.message(),
                            "); its backup at ", PeerAddress(), " takes over"));
}

void ShardReplica::Tick() {
  if (role() == Role::kReplaced && !stopped_.exchange(true)) {
    // Its waiting pulls end with UNAVAILABLE; the workers move on.
    policy_->Shutdown();
  }
  // Until Start settled the role, nothing is owed to the peer: a keep-alive
  // at the first term would be refused as stale.
  if (!started_.load(std::memory_order_acquire) || role() != Role::kPrimary) {
    return;
  }
  if (fence_ != nullptr) {
    if (absl::Status lost = fence_->fence()->Lost(); !lost.ok()) {
      BecomeReplaced();
      spdlog::error(
          "shard {}: gives the shard up: its lease in {} was lost: {}", shard_,
          fence_->fence()->Describe(), std::string(lost.message()));
      return;
    }
    // A backup left behind by a keep-alive is recorded before any step.
    (void)link_.SyncFence();
  }
  switch (link_.DueAt(clock_->Now())) {
    case PrimaryLink::Due::kCatchUp: {
      // A keep-alive first, with no lock held: a backup that is down or
      // hangs costs the ticker its timeout, not the steps. Then the whole
      // state, under the policy's lock, so no step passes it unsent.
      const bool answered = link_.Send(Shared(MakeRequest(nullptr)), 0) ==
                                PrimaryLink::Sent::kAnswered &&
                            role() == Role::kPrimary;
      // It answers: steps send to it again, this one first.
      link_.CatchUpAnswered(answered);
      if (answered) (void)policy_->SendState();
      break;
    }
    case PrimaryLink::Due::kKeepAlive:
      // Replaced or in doubt: the next Tick shuts the policy down.
      (void)link_.SendSettled(Shared(MakeRequest(nullptr)), 0);
      break;
    case PrimaryLink::Due::kNothing:
      break;
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
    // Caught up by the next Tick with the whole state.
    if (peer_.Adopt(request.sender())) link_.NewPeer();
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
  if (!started_.load(std::memory_order_acquire)) {
    // Before its role is settled a primary could serve a state its backup
    // is about to replace.
    return Named(
        absl::StatusCode::kUnavailable,
        absl::StrCat(
            rpc, ": this server is starting (",
            fence_ != nullptr ? "claiming the shard" : "asking its peer", ")"));
  }
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
  if (fence_ != nullptr) return AdmitFenced(rpc);
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
      return NoStateYet(rpc);
    }
    // From here a Replicate of the old primary is refused as stale.
    role_.store(Role::kTakingOver, std::memory_order_release);
  }
  return TakeOver(0);
}

absl::Status ShardReplica::NoStateYet(const char* rpc) const {
  return Named(absl::StatusCode::kUnavailable,
               absl::StrCat(rpc,
                            ": this is the shard's backup and it holds no "
                            "state of the primary at ",
                            PeerAddress(), " yet"));
}

absl::Status ShardReplica::AdmitFenced(const char* rpc) {
  {
    absl::MutexLock lock(&mu_);
    if (!held_.has_value()) {
      return NoStateYet(rpc);
    }
  }
  absl::StatusOr<int64_t> term = fence_->TakeOver();
  if (!term.ok()) {
    return Named(term.status().code(),
                 absl::StrCat(rpc, ": ", term.status().message()));
  }
  role_.store(Role::kTakingOver, std::memory_order_release);
  if (absl::Status s = TakeOver(*term); !s.ok()) {
    // The claim is won and cannot be given back but by the lease: this
    // process ends, and the lease with it.
    BecomeReplaced();
    return s;
  }
  return absl::OkStatus();
}

absl::Status ShardReplica::TakeOver(int64_t fenced_term) {
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
    term_ = fenced_term > 0 ? static_cast<uint64_t>(fenced_term) : term_ + 1;
    term = term_;
    ++takeovers_;
    held_.reset();
  }
  link_.StartServing(held.version());
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
  const Role r = role();
  if (r == Role::kPrimary) link_.FillStatus(status);
  absl::MutexLock lock(&mu_);
  status->set_role(RoleName(r));
  status->set_term(term_);
  status->set_peer(PeerAddress());
  status->set_takeovers(takeovers_);
  if (r != Role::kPrimary) {
    status->set_held_version(held_.has_value() ? held_->version() : 0);
    status->set_peer_silent_seconds(
        absl::ToDoubleSeconds(clock_->Now() - heard_));
  }
}

}  // namespace paramd
