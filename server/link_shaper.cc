#include "server/link_shaper.h"

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
  const absl::Time now = absl::Now();
  absl::SleepFor(Reserve(d, bytes, now) - now);
}

}  // namespace paramd
