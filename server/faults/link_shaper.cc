#include "server/faults/link_shaper.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace paramd {

LinkShaper::LinkShaper(double mbps) : bytes_per_second_(mbps * 1e6 / 8) {}

absl::Time LinkShaper::Reserve(Direction d, uint64_t bytes, absl::Time now) {
  if (!enabled()) return now;
  absl::MutexLock lock(&mu_);
  const absl::Time start = std::max(now, busy_until_[d]);
  busy_until_[d] =
      start + absl::Seconds(static_cast<double>(bytes) / bytes_per_second_);
  return busy_until_[d];
}

void LinkShaper::Transfer(Direction d, uint64_t bytes) {
  if (!enabled()) return;
  SleepUntil(Reserve(d, bytes, absl::Now()));
}

void LinkShaper::SleepUntil(absl::Time t) const {
  if (!enabled()) return;
  const absl::Duration left = t - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

}  // namespace paramd
