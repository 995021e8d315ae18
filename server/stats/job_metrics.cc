#include "server/stats/job_metrics.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"

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
    double loss_sum = 0, slowest = 0, test_loss_sum = 0;
    uint64_t correct = 0;
    ScoreHistogram scores;
    for (const auto& [rank, r] : by_rank) {
      loss_sum += r.train_loss_sum;
      s.train_samples += r.train_samples;
      correct += r.test_correct;
      s.test_total += r.test_total;
      slowest = std::max(slowest, r.train_seconds);
      test_loss_sum += r.test_loss_sum;
      scores.Merge(r.test_scores);
    }
    s.test_auc = scores.Auc();
    if (s.test_auc.has_value()) {
      s.test_log_loss = test_loss_sum / static_cast<double>(scores.samples());
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

// After the fixed record, a report's test scores: the log loss summed,
// how many bins are not empty, and those bins (all fields 8 bytes: no
// padding goes into a checkpoint).
struct ScoresHead {
  double test_loss_sum;
  uint64_t bins;
};
struct ScoredBin {
  uint64_t bin;
  uint64_t positives;
  uint64_t negatives;
};

// Begins the records of a build with test scores; a build before them
// wrote bare ReportRecords (whose first four bytes, an epoch number, are
// never these).
constexpr absl::string_view kScoredMagic = "EPM2";

template <typename T>
void Append(const T& value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Reads a T at *at and moves past it; false where the state ends first.
template <typename T>
bool Take(absl::string_view state, size_t* at, T* value) {
  if (state.size() - *at < sizeof(T)) return false;
  std::memcpy(value, state.data() + *at, sizeof(T));
  *at += sizeof(T);
  return true;
}

}  // namespace

std::string JobMetrics::SaveState() const {
  absl::MutexLock lock(&mu_);
  std::string out(kScoredMagic);
  for (const auto& [epoch, ranks] : reports_) {
    for (const auto& [rank, r] : ranks) {
      Append(ReportRecord{epoch, rank, r.train_loss_sum, r.train_samples,
                          r.train_seconds, r.test_correct, r.test_total},
             &out);
      std::vector<ScoredBin> bins;
      const ScoreHistogram& h = r.test_scores;
      for (size_t b = 0; b < h.positives().size(); ++b) {
        if (h.positives()[b] + h.negatives()[b] == 0) continue;
        bins.push_back({b, h.positives()[b], h.negatives()[b]});
      }
      Append(ScoresHead{r.test_loss_sum, bins.size()}, &out);
      for (const ScoredBin& bin : bins) Append(bin, &out);
    }
  }
  return out;
}

absl::Status JobMetrics::RestoreState(absl::string_view state) {
  const bool scored = absl::StartsWith(state, kScoredMagic);
  if (!scored && state.size() % sizeof(ReportRecord) != 0) {
    return absl::DataLossError("epoch metrics: truncated");
  }
  std::map<int, std::map<int, EpochReport>> reports;
  size_t at = scored ? kScoredMagic.size() : 0;
  while (at < state.size()) {
    ReportRecord record;
    if (!Take(state, &at, &record)) {
      return absl::DataLossError("epoch metrics: truncated");
    }
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
    if (!scored) continue;
    ScoresHead head;
    if (!Take(state, &at, &head) || head.bins > kScoreBins) {
      return absl::DataLossError("epoch metrics: truncated test scores");
    }
    r.test_loss_sum = head.test_loss_sum;
    if (head.bins == 0) continue;
    std::vector<uint64_t> positives(kScoreBins), negatives(kScoreBins);
    for (uint64_t i = 0; i < head.bins; ++i) {
      ScoredBin bin;
      if (!Take(state, &at, &bin)) {
        return absl::DataLossError("epoch metrics: truncated test scores");
      }
      if (bin.bin >= kScoreBins) {
        return absl::DataLossError("epoch metrics: a score bin out of range");
      }
      positives[bin.bin] = bin.positives;
      negatives[bin.bin] = bin.negatives;
    }
    r.test_scores.Assign(std::move(positives), std::move(negatives));
  }
  absl::MutexLock lock(&mu_);
  reports_ = std::move(reports);
  return absl::OkStatus();
}

}  // namespace paramd
