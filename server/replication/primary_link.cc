#include "server/replication/primary_link.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

// How soon a backup that did not answer is tried again.
constexpr absl::Duration kRetryEvery = absl::Seconds(1);

}  // namespace

absl::Duration ReplicaCallTimeout(absl::Duration lease) {
  return std::clamp(lease / 4, absl::Milliseconds(200), absl::Seconds(2));
}

PrimaryLink::Sent PrimaryLink::Send(
    std::shared_ptr<const proto::ReplicateRequest> request, uint64_t version,
    bool retry_slow) {
  proto::ReplicateResponse response;
  const std::shared_ptr<ReplicaPeer> peer = peer_->Get();
  const absl::Time start = clock_->Now();
  const absl::Status s =
      peer == nullptr
          ? absl::UnavailableError("its address is not known yet")
          : peer->Replicate(request, ReplicaCallTimeout(lease_), &response);
  const absl::Time now = clock_->Now();
  if (absl::IsFailedPrecondition(s)) {
    replaced_();
    spdlog::error(
        "shard {}: replaced: {} serves the shard now ({}); this process "
        "serves nothing more",
        shard_, peer_->Address(), std::string(s.message()));
    absl::MutexLock lock(&mu_);
    last_sent_ = now;
    return Sent::kReplaced;
  }
  absl::MutexLock lock(&mu_);
  last_sent_ = now;
  if (s.ok()) {
    peer_answered_ = now;
    contact_ = std::max(contact_, start);
    if (request->has_state()) {
      if (!in_sync_) {
        spdlog::info("shard {}: the backup at {} holds version {}: in sync",
                     shard_, peer_->Address(), version);
      }
      in_sync_ = true;
      sent_version_ = version;
    }
    return Sent::kAnswered;
  }
  if (fence_ == nullptr && in_sync_ && now - contact_ >= lease_) {
    // This process was silent for a lease (paused, or starved) while its
    // backup was alive and held every step: the backup may have taken
    // over without the step in hand. Going on alone would acknowledge
    // what the serving replica never sees.
    spdlog::warn(
        "shard {}: the backup at {} did not take version {} ({}), and has "
        "not heard this process for {} (liveness.lease_seconds {}): it may "
        "have taken over",
        shard_, peer_->Address(), version, std::string(s.message()),
        absl::FormatDuration(now - contact_), absl::FormatDuration(lease_));
    return Sent::kInDoubt;
  }
  if (in_sync_ && retry_slow && absl::IsDeadlineExceeded(s)) {
    // Sending the same state again is safe: the backup takes a version it
    // holds again, and answers which it holds.
    spdlog::info(
        "shard {}: the backup at {} did not answer version {} within {}; "
        "sending it once more",
        shard_, peer_->Address(), version,
        absl::FormatDuration(ReplicaCallTimeout(lease_)));
    return Sent::kSlow;
  }
  return LeftBehind(version, s, now);
}

PrimaryLink::Sent PrimaryLink::LeftBehind(uint64_t version,
                                          const absl::Status& s,
                                          absl::Time now) {
  if (in_sync_) {
    spdlog::warn(
        "shard {}: the backup at {} did not take version {} ({}); steps are "
        "acknowledged without it until it answers again",
        shard_, peer_->Address(), version, std::string(s.message()));
  }
  in_sync_ = false;
  next_try_ = now + kRetryEvery;
  return Sent::kLeftBehind;
}

absl::Status PrimaryLink::SendSettled(
    std::shared_ptr<const proto::ReplicateRequest> request, uint64_t version) {
  Sent sent = Send(request, version, /*retry_slow=*/true);
  if (sent == Sent::kSlow) sent = Send(request, version);
  if (sent == Sent::kInDoubt) sent = Send(request, version);
  if (sent == Sent::kInDoubt) {
    replaced_();
    spdlog::error(
        "shard {}: out of touch with its backup at {} for longer than "
        "liveness.lease_seconds: it may serve the shard now, so this "
        "process serves nothing more (started again, it asks its peer "
        "which of them serves)",
        shard_, peer_->Address());
  }
  if (sent == Sent::kReplaced || sent == Sent::kInDoubt) {
    return absl::UnavailableError(
        absl::StrCat("this server was replaced by its backup at ",
                     peer_->Address(), "; ask it"));
  }
  return absl::OkStatus();
}

absl::Status PrimaryLink::SyncFence() {
  if (fence_ == nullptr) return absl::OkStatus();
  absl::MutexLock mark(&mark_mu_);
  bool in_sync = false;
  {
    absl::MutexLock lock(&mu_);
    in_sync = in_sync_;
  }
  if (in_sync == marked_in_sync_) return absl::OkStatus();
  const absl::Status s = fence_->MarkBackup(in_sync);
  if (s.ok()) {
    marked_in_sync_ = in_sync;
    spdlog::info("shard {}: {} says the backup at {} is {}", shard_,
                 fence_->Describe(), peer_->Address(),
                 in_sync ? "in sync (it may take over)" : "behind");
    return s;
  }
  if (in_sync) {
    spdlog::warn(
        "shard {}: the backup at {} is in sync but {} could not be told ({}); "
        "until it is, the backup does not take over",
        shard_, peer_->Address(), fence_->Describe(), std::string(s.message()));
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("the backup at ", peer_->Address(), " is behind and ",
                   fence_->Describe(), " could not be told: ", s.message()));
}

bool PrimaryLink::StepSends(uint64_t version) {
  absl::MutexLock lock(&mu_);
  applied_version_ = std::max(applied_version_, version);
  return in_sync_ || next_try_ == absl::InfinitePast();
}

PrimaryLink::Due PrimaryLink::DueAt(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (!in_sync_ && now >= next_try_) return Due::kCatchUp;
  if (in_sync_ && now - last_sent_ >= lease_ / 4) return Due::kKeepAlive;
  return Due::kNothing;
}

void PrimaryLink::CatchUpAnswered(bool answered) {
  absl::MutexLock lock(&mu_);
  next_try_ = answered ? absl::InfinitePast() : clock_->Now() + kRetryEvery;
}

void PrimaryLink::NewPeer() {
  absl::MutexLock lock(&mu_);
  in_sync_ = false;
  next_try_ = absl::InfinitePast();
}

void PrimaryLink::StartServing(uint64_t version) {
  absl::MutexLock lock(&mu_);
  in_sync_ = false;
  next_try_ = clock_->Now();
  applied_version_ = version;
  sent_version_ = 0;
}

void PrimaryLink::FillStatus(proto::ReplicaStatus* status) const {
  absl::MutexLock lock(&mu_);
  status->set_peer_in_sync(in_sync_);
  status->set_lag_versions(in_sync_ ? 0 : applied_version_ - sent_version_);
  status->set_peer_silent_seconds(
      peer_answered_ == absl::InfinitePast()
          ? -1
          : absl::ToDoubleSeconds(clock_->Now() - peer_answered_));
}

}  // namespace paramd
