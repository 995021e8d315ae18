#include "worker/replica_choice.h"

#include <utility>

namespace paramd {

ReplicaChoice::ReplicaChoice(const std::vector<int>& replicas,
                             absl::Duration hung_after, Clock* clock)
    : hung_after_(hung_after), clock_(clock) {
  for (int n : replicas) {
    auto shard = std::make_unique<Shard>();
    shard->replicas = n;
    HeardNow(shard.get());
    shards_.push_back(std::move(shard));
  }
}

void ReplicaChoice::HeardNow(Shard* shard) const {
  shard->heard.store(absl::ToUnixNanos(clock_->Now()),
                     std::memory_order_relaxed);
}

void ReplicaChoice::Note(int shard, const absl::Status& status) {
  // A cancelled call says nothing of its server: this worker cancels the
  // other shards' calls of a step when one fails (the StepDriver notes those
  // its server ended).
  const absl::StatusCode code =
      absl::IsCancelled(status) ? absl::StatusCode::kOk : status.code();
  shards_[shard]->last_code.store(static_cast<int>(code),
                                  std::memory_order_relaxed);
}

void ReplicaChoice::NoteHung(int shard, const absl::Status& status) {
  Note(shard, status);
  shards_[shard]->hung = true;
}

void ReplicaChoice::Heard(int shard, const absl::Status& ended) {
  switch (ended.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
      return;
    default:
      HeardNow(shards_[shard].get());
  }
}

absl::Duration ReplicaChoice::Silence(int shard) const {
  return clock_->Now() - absl::FromUnixNanos(shards_[shard]->heard.load(
                             std::memory_order_relaxed));
}

bool ReplicaChoice::Hung(int shard) const {
  return shards_[shard]->replicas > 1 && Silence(shard) > hung_after_;
}

std::vector<int> ReplicaChoice::FailOver() {
  std::vector<int> moved;
  for (int s = 0; s < shards(); ++s) {
    Shard& shard = *shards_[s];
    const auto code = static_cast<absl::StatusCode>(
        shard.last_code.exchange(0, std::memory_order_relaxed));
    if (shard.replicas < 2 || (code != absl::StatusCode::kUnavailable &&
                               code != absl::StatusCode::kDeadlineExceeded)) {
      continue;
    }
    const int from = shard.current.load(std::memory_order_relaxed);
    const absl::Time now = clock_->Now();
    if (shard.avoided == 1 - from && now < shard.avoid_until) {
      continue;  // Its backup refuses until it takes over: wait for it.
    }
    if (std::exchange(shard.hung, false)) {
      shard.avoided = from;
      shard.avoid_until = now + hung_after_;
    }
    shard.current.store(1 - from, std::memory_order_release);
    // The other replica gets a whole hung_after.
    HeardNow(&shard);
    moved.push_back(s);
  }
  return moved;
}

}  // namespace paramd
