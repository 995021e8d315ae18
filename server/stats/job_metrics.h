// JobMetrics: the job's per-epoch figures, aggregated from each worker's
// epoch report (training loss and samples, its share of the test set).
// A report repeated by a retrying worker replaces its earlier one.
// Thread-safe.
#ifndef PARAMD_SERVER_STATS_JOB_METRICS_H_
#define PARAMD_SERVER_STATS_JOB_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/base/epoch_report.h"
#include "common/base/score_histogram.h"

namespace paramd {

struct EpochSummary {
  int epoch = 0;
  int workers_reported = 0;
  bool complete = false;  // Every counted rank reported.
  double train_loss = 0;  // Mean per-sample loss.
  double test_accuracy = 0;
  uint64_t test_total = 0;
  uint64_t train_samples = 0;
  double samples_per_second = 0;  // All workers' samples / slowest worker.
  // Where the reports carry test scores (a binary classifier): the AUC
  // of the ranks' scores together, and their mean log loss.
  std::optional<AucEstimate> test_auc;
  double test_log_loss = 0;
};

class JobMetrics {
 public:
  explicit JobMetrics(int num_workers) : num_workers_(num_workers) {}

  void Report(int epoch, int rank, const EpochReport& report);
  // Every epoch with at least one report, in order. An epoch is complete
  // when every rank with counted[rank] reported (ranks dropped from the
  // job do not hold it back); all ranks count when `counted` is empty.
  std::vector<EpochSummary> Summaries(
      const std::vector<bool>& counted = {}) const;

  // Every report, as bytes for a checkpoint, and back (DataLoss when
  // damaged; nothing changes then). Restores the bytes of a build before
  // test scores too (fixed records, none scored).
  std::string SaveState() const;
  absl::Status RestoreState(absl::string_view state);

 private:
  const int num_workers_;
  mutable absl::Mutex mu_;
  // epoch → rank → report
  std::map<int, std::map<int, EpochReport>> reports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STATS_JOB_METRICS_H_
