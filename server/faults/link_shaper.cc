#include "server/faults/link_shaper.h"

#include <algorithm>

namespace paramd {

LinkShaper::LinkShaper(double mbps, Clock* clock)
    : bytes_per_second_(mbps * 1e6 / 8), clock_(clock) {}

absl::Time LinkShaper::Reserve(Direction d, uint64_t bytes, absl::Time now) {
  if (!enabled()) return now;
  absl::MutexLock lock(&mu_);
  const absl::Time start = std::max(now, busy_until_[d]);
  busy_until_[d] =
      start + absl::Seconds(static_cast<double>(bytes) / bytes_per_second_);
  return busy_until_[d];
}

absl::Time LinkShaper::Reserve(Direction d, uint64_t bytes) {
  return Reserve(d, bytes, clock_->Now());
}

void LinkShaper::Transfer(Direction d, uint64_t bytes) {
  if (!enabled()) return;
  SleepUntil(Reserve(d, bytes));
}

void LinkShaper::SleepUntil(absl::Time t) const {
  if (enabled()) clock_->SleepUntil(t);
}

}  // namespace paramd
