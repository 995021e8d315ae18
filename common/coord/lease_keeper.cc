#include "common/coord/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paramd {

LeaseKeeper::LeaseKeeper(int64_t lease, absl::Duration ttl, absl::Time sent,
                         Renew renew, Clock* clock)
    : lease_(lease),
      ttl_(ttl),
      renew_(std::move(renew)),
      clock_(clock),
      live_until_(sent + ttl),
      last_sent_(sent) {}

void LeaseKeeper::CheckExpired(absl::Time now) {
  if (lost_.ok() && now >= live_until_) {
    lost_ = absl::FailedPreconditionError(
        absl::StrCat("etcd lease ", lease_, " lost: not renewed within its ",
                     absl::FormatDuration(ttl_), " (live until ",
                     absl::FormatTime(live_until_), ")"));
  }
}

absl::Time LeaseKeeper::NextDue() const {
  absl::MutexLock lock(&mu_);
  if (retry_now_) return clock_->Now();
  return last_sent_ + ttl_ / 3;
}

absl::Status LeaseKeeper::Tick(bool now) {
  absl::Time sent;
  {
    absl::MutexLock lock(&mu_);
    sent = clock_->Now();
    CheckExpired(sent);
    if (!lost_.ok()) return lost_;
    if (!now && !retry_now_ && sent < last_sent_ + ttl_ / 3) {
      return absl::OkStatus();
    }
    last_sent_ = sent;
  }
  // Not under mu_: Live() answers while the renewal is on its way.
  absl::StatusOr<absl::Duration> left = renew_(lease_);
  absl::MutexLock lock(&mu_);
  if (left.ok()) {
    retry_now_ = false;
    // Never shortened by a renewal whose answer came late.
    live_until_ = std::max(live_until_, sent + *left);
    CheckExpired(clock_->Now());
    return lost_;
  }
  if (left.status().code() == absl::StatusCode::kNotFound) {
    if (lost_.ok()) {
      lost_ = absl::FailedPreconditionError(absl::StrCat(
          "etcd lease ", lease_, " lost: ", left.status().message()));
    }
    return lost_;
  }
  retry_now_ = true;
  CheckExpired(clock_->Now());
  return left.status();
}

bool LeaseKeeper::Live() const {
  absl::MutexLock lock(&mu_);
  return lost_.ok() && clock_->Now() < live_until_;
}

absl::Time LeaseKeeper::live_until() const {
  absl::MutexLock lock(&mu_);
  return live_until_;
}

absl::Status LeaseKeeper::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

}  // namespace paramd
