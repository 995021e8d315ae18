// JobMetrics (server/stats/job_metrics.h): the ranks' epoch reports summed
// into the job's figures — accuracy over the union of the test shares,
// and for a binary classifier the AUC and log loss of the union — and
// kept across a checkpoint, including one written before test scores.
#include "server/stats/job_metrics.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

namespace paramd {
namespace {

EpochReport Report(int epoch, uint64_t correct, uint64_t total) {
  EpochReport r;
  r.epoch = epoch;
  r.train_loss_sum = 10;
  r.train_samples = 20;
  r.train_seconds = 2;
  r.test_correct = correct;
  r.test_total = total;
  return r;
}

// A share of scored samples: `p` for each (positive, negative) given.
EpochReport Scored(int epoch, std::vector<std::pair<double, bool>> samples,
                   double loss_sum) {
  EpochReport r = Report(epoch, 0, samples.size());
  for (auto [p, positive] : samples) r.test_scores.Add(p, positive);
  r.test_loss_sum = loss_sum;
  return r;
}

TEST_CASE("job metrics: accuracy over the union, no AUC without scores",
          "[metrics]") {
  JobMetrics m(2);
  m.Report(1, 0, Report(1, 30, 40));
  m.Report(1, 1, Report(1, 10, 60));
  const std::vector<EpochSummary> s = m.Summaries();
  REQUIRE(s.size() == 1);
  CHECK(s[0].complete);
  CHECK(s[0].test_accuracy == 0.4);
  CHECK(s[0].test_total == 100);
  CHECK_FALSE(s[0].test_auc.has_value());
  CHECK(s[0].test_log_loss == 0);
}

TEST_CASE("job metrics: the AUC of the ranks' scores together", "[metrics]") {
  JobMetrics m(2);
  // Each share alone orders its pairs perfectly (AUC 1); together the
  // positive at 0.3 falls below the negative at 0.6: 3 of 4 pairs.
  m.Report(1, 0, Scored(1, {{0.3, true}, {0.2, false}}, 1.0));
  m.Report(1, 1, Scored(1, {{0.9, true}, {0.6, false}}, 3.0));
  const std::vector<EpochSummary> s = m.Summaries();
  REQUIRE(s.size() == 1);
  REQUIRE(s[0].test_auc.has_value());
  CHECK(s[0].test_auc->auc == 0.75);
  CHECK(s[0].test_auc->max_error == 0);
  CHECK(s[0].test_log_loss == 1.0);  // (1 + 3) / 4 samples.
  // A report repeated by a retrying rank replaces its scores.
  m.Report(1, 1, Scored(1, {{0.9, true}, {0.1, false}}, 1.0));
  CHECK(m.Summaries()[0].test_auc->auc == 1.0);
  CHECK(m.Summaries()[0].test_log_loss == 0.5);
}

TEST_CASE("job metrics: scores survive a checkpoint", "[metrics]") {
  JobMetrics m(2);
  m.Report(1, 0, Scored(1, {{0.3, true}, {0.2, false}, {0.7, false}}, 1.5));
  m.Report(1, 1, Report(1, 5, 9));  // A rank whose model gave no scores.
  m.Report(2, 1, Scored(2, {{0.99, true}, {0.01, false}}, 0.25));
  const std::string saved = m.SaveState();
  JobMetrics restored(2);
  REQUIRE(restored.RestoreState(saved).ok());
  const std::vector<EpochSummary> a = m.Summaries(), b = restored.Summaries();
  REQUIRE(b.size() == 2);
  for (size_t e = 0; e < a.size(); ++e) {
    CHECK(b[e].test_accuracy == a[e].test_accuracy);
    CHECK(b[e].test_total == a[e].test_total);
    REQUIRE(b[e].test_auc.has_value());
    CHECK(b[e].test_auc->auc == a[e].test_auc->auc);
    CHECK(b[e].test_log_loss == a[e].test_log_loss);
  }
  CHECK(restored.SaveState() == saved);
  // Damaged: a cut anywhere in the scores, or a bin beyond the last.
  JobMetrics target(2);
  target.Report(3, 0, Report(3, 1, 1));
  CHECK(
      absl::IsDataLoss(target.RestoreState(saved.substr(0, saved.size() - 3))));
  // The magic, rank 0's 48-byte record, 10 bytes of its 16-byte head.
  CHECK(absl::IsDataLoss(target.RestoreState(saved.substr(0, 4 + 48 + 10))));
  std::string bad_bin = saved;
  const uint64_t beyond = kScoreBins;
  std::memcpy(&bad_bin[4 + 48 + 16], &beyond, sizeof(beyond));
  CHECK(absl::IsDataLoss(target.RestoreState(bad_bin)));
  REQUIRE(target.Summaries().size() == 1);  // Unchanged.
  CHECK(target.Summaries()[0].epoch == 3);
}

TEST_CASE("job metrics: a checkpoint from before test scores restores",
          "[metrics]") {
  // That build wrote bare fixed records, one per report.
  struct OldRecord {
    int32_t epoch, rank;
    double train_loss_sum;
    uint64_t train_samples;
    double train_seconds;
    uint64_t test_correct, test_total;
  };
  std::string old;
  for (const OldRecord& r : {OldRecord{1, 0, 4.0, 8, 1.0, 3, 4},
                             OldRecord{1, 1, 2.0, 8, 2.0, 1, 4}}) {
    old.append(reinterpret_cast<const char*>(&r), sizeof(r));
  }
  JobMetrics m(2);
  REQUIRE(m.RestoreState(old).ok());
  const std::vector<EpochSummary> s = m.Summaries();
  REQUIRE(s.size() == 1);
  CHECK(s[0].complete);
  CHECK(s[0].train_loss == 6.0 / 16);
  CHECK(s[0].test_accuracy == 0.5);
  CHECK_FALSE(s[0].test_auc.has_value());
  CHECK(absl::IsDataLoss(m.RestoreState(old.substr(1))));
}

}  // namespace
}  // namespace paramd
