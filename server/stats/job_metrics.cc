#include "server/stats/job_metrics.h"

#include <algorithm>
#include <cstring>

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

namespace {

struct ReportRecord {
  int32_t epoch;
  int32_t rank;
  double train_loss_sum;
  uint64_t train_samples;
  double train_seconds;
  uint64_t test_correct;
  uint64_t test_total;
};

}  // namespace

std::string JobMetrics::SaveState() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [epoch, ranks] : reports_) {
    for (const auto& [rank, r] : ranks) {
      const ReportRecord record{
          epoch,           rank,           r.train_loss_sum, r.train_samples,
          r.train_seconds, r.test_correct, r.test_total};
      out.append(reinterpret_cast<const char*>(&record), sizeof(record));
    }
  }
  return out;
}

absl::Status JobMetrics::RestoreState(absl::string_view state) {
  if (state.size() % sizeof(ReportRecord) != 0) {
    return absl::DataLossError("epoch metrics: truncated");
  }
  std::map<int, std::map<int, EpochReport>> reports;
  for (size_t at = 0; at < state.size(); at += sizeof(ReportRecord)) {
    ReportRecord record;
    std::memcpy(&record, state.data() + at, sizeof(record));
    if (record.rank < 0 || record.rank >= num_workers_ || record.epoch < 1) {
      return absl::DataLossError("epoch metrics: a report out of range");
    }
    EpochReport& r = reports[record.epoch][record.rank];
    r.epoch = record.epoch;
    r.train_loss_sum = record.train_loss_sum;
    r.train_samples = record.train_samples;
    r.train_seconds = record.train_seconds;
    r.test_correct = record.test_correct;
    r.test_total = record.test_total;
  }
  absl::MutexLock lock(&mu_);
  reports_ = std::move(reports);
  return absl::OkStatus();
}

}  // namespace paramd
