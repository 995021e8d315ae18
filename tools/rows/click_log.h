// ClickLog: a synthetic click log whose best achievable loss is known.
//
// Sample i (any i, in any order: a pure function of seed and i) has
// `fields` categorical values, each drawn Zipf(s) over 2^32 possible
// values (rank k with probability ∝ k^-s, then scattered over the 32-bit
// range by a hash, so popular values are not small numbers), and a click
// label drawn from a hidden logistic teacher: p = σ(bias + Σ_f w(f, v_f)
// + Σ_j a_j tanh(x_j − μ_j)) with w(f, v) ~ normal(0, teacher_scale), a
// function of (seed, f, v). With `dense` > 0 (the Criteo layout's 13) each
// sample also has that many count features c_j = ⌊exp(μ_j + z)⌋ − 1 (z ~
// normal(0, 1), μ_j = 0.5 + j / 4), and the teacher reads them as x_j =
// log(1 + c_j), through a_j ~ normal(0, dense_scale) and a tanh: what a
// bottom MLP can learn, and a linear read only in part. A model can do no
// better on average than the teacher's own log loss, which Sample reports
// with each sample.
#ifndef PARAMD_TOOLS_ROWS_CLICK_LOG_H_
#define PARAMD_TOOLS_ROWS_CLICK_LOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paramd {

struct ClickLogOptions {
  uint64_t seed = 1;
  int fields = 26;
  double zipf = 1.05;          // s > 1.
  double teacher_scale = 0.5;  // Std of each field's weights.
  double teacher_bias = -1.0;  // About 27% clicks.
  int dense = 0;               // Count features per sample.
  double dense_scale = 1.0;    // Std of the teacher's a_j.
};

class ClickLog {
 public:
  explicit ClickLog(const ClickLogOptions& options);

  int fields() const { return options_.fields; }
  int dense() const { return options_.dense; }

  // Writes sample `index`'s fields' values to values[0, fields) and its
  // counts to counts[0, dense) (not read without dense features); returns
  // its label (0 or 1). `*teacher_loss` gets the teacher's log loss on it,
  // -log p(label).
  int Sample(uint64_t index, uint32_t* values, int64_t* counts,
             double* teacher_loss) const;

  // The row id of value `v` of field `f` in a table of 2^32 rows.
  static uint64_t RowOf(int field, uint32_t value);

  // The teacher's weight of (field, value).
  double TeacherWeight(int field, uint32_t value) const;

 private:
  // A Zipf(s) rank in [1, 2^32] from a uniform u in (0, 1).
  double ZipfRank(double u) const;

  const ClickLogOptions options_;
  const double a_;    // 1 - s
  const double top_;  // (2^32)^(1-s) - 1
};

// What the teacher achieves on the samples of a file WriteClickLogFile
// wrote.
struct ClickLogFigures {
  int64_t samples = 0;
  double clicks = 0;            // Share of label 1.
  double teacher_loss = 0;      // Mean log loss.
  double teacher_accuracy = 0;  // Predicting a click where p > 1/2.
  // The exact area under the ROC curve of the teacher's p (ties counted
  // half): what a learner's AUC on these samples approaches from below.
  double teacher_auc = 0;
};

// The exact AUC of scores by label (ties counted half); 0 when either
// class has no sample. Sorts both.
double ExactAuc(std::vector<double>* positives, std::vector<double>* negatives);

// Writes samples [first, first + count) of `log` as a click-log file
// (worker/data/click_log_file.h): a line each, the label, its counts in
// decimal (with dense features), then every field's value as 8 hex
// digits, tab-separated.
absl::StatusOr<ClickLogFigures> WriteClickLogFile(const ClickLog& log,
                                                  uint64_t first, int64_t count,
                                                  const std::string& path);

}  // namespace paramd

#endif  // PARAMD_TOOLS_ROWS_CLICK_LOG_H_
