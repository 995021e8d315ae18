#include "server/stats/shard_stats.h"

#include <algorithm>
#include <cmath>

namespace paramd {

void ShardStats::RecordPullWait(absl::Duration wait) {
  pull_wait_seconds_.Observe(absl::ToDoubleSeconds(wait));
  absl::MutexLock lock(&mu_);
  const double ms = absl::ToDoubleMilliseconds(wait);
  if (waits_ms_.size() < kWaitSamples) {
    waits_ms_.push_back(ms);
  } else {
    waits_ms_[next_] = ms;
  }
  next_ = (next_ + 1) % kWaitSamples;
}

void ShardStats::RecordPush(absl::Time now) {
  absl::MutexLock lock(&mu_);
  first_push_ = std::min(first_push_, now);
  pushes_.push_back(now);
  while (!pushes_.empty() && pushes_.front() < now - kRateWindow) {
    pushes_.pop_front();
  }
}

double ShardStats::PullWaitMs(double p) const {
  std::vector<double> sorted;
  {
    absl::MutexLock lock(&mu_);
    sorted = waits_ms_;
  }
  if (sorted.empty()) return 0;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank.
  const size_t rank = static_cast<size_t>(
      std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double ShardStats::PushesPerSecond(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (auto it = pushes_.rbegin();
       it != pushes_.rend() && *it >= now - kRateWindow; ++it) {
    ++n;
  }
  const absl::Duration span = std::min(kRateWindow, now - first_push_);
  return span > absl::ZeroDuration() ? n / absl::ToDoubleSeconds(span) : 0.0;
}

}  // namespace paramd
