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

std::vector<PullWaiters::Waiter> PullWaiters::TakeOverdue(
    absl::Time now, absl::Duration after) {
  std::vector<Waiter> overdue;
  absl::MutexLock lock(&mu_);
  for (auto& [id, w] : waiters_) {
    if (!w.warned && now - w.since > after) {
      w.warned = true;
      overdue.push_back(w);
    }
  }
  return overdue;
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
