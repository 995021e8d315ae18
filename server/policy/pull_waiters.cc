#include "server/policy/pull_waiters.h"

namespace paramd {

uint64_t PullWaiters::Add(int rank, uint64_t clock, absl::Time since) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  waiters_[id] = Waiter{rank, clock, since};
  return id;
}

void PullWaiters::Remove(uint64_t id) {
  absl::MutexLock lock(&mu_);
  waiters_.erase(id);
}

std::vector<PullWaiters::Waiter> PullWaiters::TakeDue(absl::Time now,
                                                      absl::Duration after) {
  std::vector<Waiter> due;
  absl::MutexLock lock(&mu_);
  for (auto& [id, w] : waiters_) {
    // Past 2^20 the next warning is years away: no more.
    if (w.warnings < 20 && now - w.since > after * (1 << w.warnings)) {
      ++w.warnings;
      due.push_back(w);
    }
  }
  return due;
}

std::vector<PullWaiters::Waiter> PullWaiters::List() const {
  std::vector<Waiter> all;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, w] : waiters_) all.push_back(w);
  return all;
}

bool PullWaiters::TEST_AwaitCount(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiters_.size() == n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

}  // namespace paramd
