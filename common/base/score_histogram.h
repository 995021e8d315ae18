// ScoreHistogram: a binary classifier's test samples counted by its
// predicted probability of the positive class, in kScoreBins equal bins
// over [0, 1] — what each worker reports for its share of the test set, so
// that the servers can add the shares and give the area under the ROC
// curve (AUC) of the whole test set, which, unlike accuracy, is not a sum
// of the shares' own figures. This is the thresholded estimate of
// tf.keras.metrics.AUC, with 8,192 thresholds instead of its default 200.
//
// Within a bin, scores are taken as tied (a positive and a negative in the
// same bin count half a correctly ordered pair), so the estimate is off
// the exact AUC by at most AucEstimate::max_error: the share of
// (positive, negative) pairs that fall in one bin, halved.
#ifndef PARAMD_COMMON_BASE_SCORE_HISTOGRAM_H_
#define PARAMD_COMMON_BASE_SCORE_HISTOGRAM_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace paramd {

inline constexpr int kScoreBins = 8192;

struct AucEstimate {
  double auc = 0;
  double max_error = 0;  // |auc - the exact AUC| is at most this.
};

class ScoreHistogram {
 public:
  // Empty: no bins (a report of a model that is not binary).
  ScoreHistogram() = default;

  // The bin of probability p (clamped to [0, 1]; NaN goes to bin 0).
  static int BinOf(double p);

  // Counts one sample whose positive-class probability is p.
  void Add(double p, bool positive);
  // Adds another histogram's counts (an empty one adds nothing).
  void Merge(const ScoreHistogram& other);

  bool empty() const { return positives_.empty(); }
  uint64_t samples() const;
  // kScoreBins counts each, or none.
  const std::vector<uint64_t>& positives() const { return positives_; }
  const std::vector<uint64_t>& negatives() const { return negatives_; }
  // Takes bins as reported: both empty, or both kScoreBins long (else
  // false and nothing changes).
  bool Assign(std::vector<uint64_t> positives, std::vector<uint64_t> negatives);

  // None when the samples are all of one class (or there are none).
  std::optional<AucEstimate> Auc() const;

 private:
  void Allocate();

  std::vector<uint64_t> positives_;
  std::vector<uint64_t> negatives_;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_SCORE_HISTOGRAM_H_
