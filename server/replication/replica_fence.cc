#include "server/replication/replica_fence.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace paramd {

absl::StatusOr<ShardFence::Claim> ReplicaFence::ClaimAtStart(
    const std::string& own_address) {
  const absl::Time give_up = clock_->Now() + 3 * lease_;
  bool waiting = false;
  while (true) {
    absl::StatusOr<ShardFence::Claim> claim = fence_->ClaimPrimary();
    if (!claim.ok()) {
      return absl::Status(
          claim.status().code(),
          absl::StrCat(fence_->Describe(), ": ", claim.status().message()));
    }
    if (claim->won || claim->holder != own_address) return claim;
    if (clock_->Now() >= give_up) {
      return absl::FailedPreconditionError(absl::StrCat(
          "an earlier run at ", own_address, " still holds the shard after ",
          absl::FormatDuration(3 * lease_), ": ", claim->why));
    }
    if (!waiting) {
      spdlog::info(
          "shard {}: {}: an earlier run of this server; waiting for its "
          "lease to end",
          shard_, claim->why);
      waiting = true;
    }
    clock_->SleepUntil(clock_->Now() + lease_ / 10);
  }
}

absl::StatusOr<int64_t> ReplicaFence::TakeOver() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (now - last_claim_ < kClaimEvery) {
    return absl::UnavailableError(last_why_);
  }
  last_claim_ = now;
  absl::StatusOr<ShardFence::Claim> claim = fence_->TakeOver();
  if (claim.ok() && claim->won) return claim->term;
  last_why_ = absl::StrCat(
      "this is the shard's backup and does not take over: ",
      claim.ok() ? claim->why : std::string(claim.status().message()));
  return absl::UnavailableError(last_why_);
}

absl::Status ReplicaFence::VouchForStep(PrimaryLink& link) const {
  if (absl::Status s = link.SyncFence(); !s.ok()) return s;
  if (fence_->Holds()) return absl::OkStatus();
  const absl::Status lost = fence_->Lost();
  return absl::UnavailableError(absl::StrCat(
      "its lease in ", fence_->Describe(), " is not live (",
      lost.ok() ? "not renewed in time" : std::string(lost.message()), ")"));
}

}  // namespace paramd
