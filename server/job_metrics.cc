#include "server/job_metrics.h"

#include <algorithm>

namespace paramd {

void JobMetrics::Report(int epoch, int rank, const EpochReport& report) {
  absl::MutexLock lock(&mu_);
  reports_[epoch][rank] = report;
}

std::vector<EpochSummary> JobMetrics::Summaries(
    const std::vector<bool>& counted) const {
  absl::MutexLock lock(&mu_);
  std::vector<EpochSummary> out;
  for (const auto& [epoch, by_rank] : reports_) {
    EpochSummary s;
    s.epoch = epoch;
    s.workers_reported = static_cast<int>(by_rank.size());
    s.complete = true;
    for (int r = 0; r < num_workers_; ++r) {
      const bool counts = counted.empty() || counted[r];
      if (counts && by_rank.count(r) == 0) s.complete = false;
    }
    double loss_sum = 0, slowest = 0;
    uint64_t correct = 0;
    for (const auto& [rank, r] : by_rank) {
      loss_sum += r.train_loss_sum;
      s.train_samples += r.train_samples;
      correct += r.test_correct;
      s.test_total += r.test_total;
      slowest = std::max(slowest, r.train_seconds);
    }
    if (s.train_samples > 0) s.train_loss = loss_sum / s.train_samples;
    if (s.test_total > 0) {
      s.test_accuracy = static_cast<double>(correct) / s.test_total;
    }
    if (slowest > 0) s.samples_per_second = s.train_samples / slowest;
    out.push_back(s);
  }
  return out;
}

}  // namespace paramd
