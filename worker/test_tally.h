// TestTally: what one evaluation of a rank's test share adds up to, for
// its epoch report: the correct predictions, and for a binary classifier
// (two classes: a click log's model) the log loss and the scores by bin
// from which the servers give the job's AUC (common/base/score_histogram.h).
#ifndef PARAMD_WORKER_TEST_TALLY_H_
#define PARAMD_WORKER_TEST_TALLY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/base/epoch_report.h"

namespace paramd {

class TestTally {
 public:
  explicit TestTally(int classes) : classes_(classes) {}

  // Whether this model's evaluation yields scores (AddLogits), or only a
  // count of correct predictions (AddCorrect).
  bool scored() const { return classes_ == 2; }

  // n samples' logits [n × classes] and labels: counts the correct ones
  // (the largest logit, the first of ties) and, where scored, adds each
  // sample's log loss and its probability of class 1 by label.
  void AddLogits(const float* logits, const int32_t* y, int n);
  void AddCorrect(int64_t correct) { correct_ += correct; }
  // A binary classifier's samples given as each one's probability p of
  // class 1 (a framework worker's evaluation): counted correct where
  // p > 1/2 says the label, log loss -log p(label) (at most -log 1e-15).
  // InvalidArgument naming `scores` or `labels` (a p outside [0, 1] or
  // not finite, a label not 0 or 1, lengths that differ; nothing added
  // then), or where the model is not a binary one.
  absl::Status AddProbabilities(absl::Span<const double> scores,
                                absl::Span<const int64_t> labels);

  // Sets the report's test fields; `total` samples were evaluated.
  void Fill(uint64_t total, EpochReport* report) const;

 private:
  const int classes_;
  int64_t correct_ = 0;
  double loss_sum_ = 0;
  ScoreHistogram scores_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_TEST_TALLY_H_
