#include "server/sync_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace paramd {

SyncPolicy::SyncPolicy(int num_workers, ShardStore* store)
    : num_workers_(num_workers), store_(store) {
  absl::MutexLock lock(&mu_);
  round_ = store_->version();
  pushed_.assign(num_workers_, false);
  for (int i = 0; i < store_->num_chunks(); ++i) {
    sum_.emplace_back(store_->chunk_spec(i).length, 0.0f);
  }
}

uint64_t SyncPolicy::OnRegister(int /*rank*/) {
  absl::MutexLock lock(&mu_);
  return round_;
}

absl::Status SyncPolicy::Push(
    int rank, uint64_t clock,
    absl::Span<const absl::Span<const float>> grads) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the shard is shutting down");
  if (rank < 0 || rank >= num_workers_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Push: rank ", rank, " is outside [0, ", num_workers_,
                     ")"));
  }
  if (clock != round_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Push: rank ", rank, " sent a gradient for clock ", clock,
        " but the sync round is ", round_,
        clock < round_ ? " (that round is already applied)"
                       : " (pull the current version first)"));
  }
  if (pushed_[rank]) {
    return absl::AlreadyExistsError(absl::StrCat(
        "Push: rank ", rank, " already pushed its gradient for clock ",
        clock));
  }
  // The first gradient of a round overwrites the sum; later ones add.
  const bool first = num_pushed_ == 0;
  for (size_t c = 0; c < sum_.size(); ++c) {
    float* __restrict s = sum_[c].data();
    const float* __restrict g = grads[c].data();
    const size_t n = sum_[c].size();
    if (first) {
      std::copy(g, g + n, s);
    } else {
      for (size_t i = 0; i < n; ++i) s[i] += g[i];
    }
  }
  pushed_[rank] = true;
  if (++num_pushed_ == num_workers_) {
    store_->ApplyStep(sum_, 1.0f / static_cast<float>(num_workers_));
    ++round_;
    num_pushed_ = 0;
    std::fill(pushed_.begin(), pushed_.end(), false);
  }
  return absl::OkStatus();
}

absl::Status SyncPolicy::WaitReadable(int /*rank*/, uint64_t clock,
                                      absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, clock]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || round_ >= clock;
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (shutdown_) return absl::UnavailableError("the shard is shutting down");
  if (round_ < clock) {
    return absl::DeadlineExceededError(absl::StrCat(
        "Pull: version ", clock, " is not ready; the shard is at ", round_,
        " and waits for ", num_workers_ - num_pushed_,
        " more worker(s) to push clock ", round_));
  }
  return absl::OkStatus();
}

void SyncPolicy::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const PolicyConfig& config,
                                               int num_workers,
                                               ShardStore* store) {
  switch (config.type) {
    case PolicyType::kSync:
      return std::make_unique<SyncPolicy>(num_workers, store);
  }
  return nullptr;
}

}  // namespace paramd
