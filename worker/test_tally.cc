#include "worker/test_tally.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace paramd {

void TestTally::AddLogits(const float* logits, const int32_t* y, int n) {
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<int64_t>(i) * classes_;
    const int predicted =
        static_cast<int>(std::max_element(z, z + classes_) - z);
    correct_ += predicted == y[i];
    if (!scored()) continue;
    // Two classes: p(1) = σ(z1 - z0), and -log p(label) without overflow:
    // log(1 + e^d) for d the other class's margin over the label's.
    const double margin = static_cast<double>(z[1]) - z[0];
    const double d = y[i] == 1 ? -margin : margin;
    loss_sum_ += d > 0 ? d + std::log1p(std::exp(-d)) : std::log1p(std::exp(d));
    scores_.Add(1.0 / (1.0 + std::exp(-margin)), y[i] == 1);
  }
}

absl::Status TestTally::AddProbabilities(absl::Span<const double> scores,
                                         absl::Span<const int64_t> labels) {
  if (!scored()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scores: the model has ", classes_,
                     " classes; scores are a binary classifier's"));
  }
  if (scores.size() != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scores: ", scores.size(), " of them for ", labels.size(), " labels"));
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!(scores[i] >= 0 && scores[i] <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scores[", i, "]: ", scores[i], " is not a probability in [0, 1]"));
    }
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[", i, "]: ", labels[i], " is not 0 or 1"));
    }
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    const bool positive = labels[i] == 1;
    correct_ += (scores[i] > 0.5) == positive;
    const double p_label = positive ? scores[i] : 1.0 - scores[i];
    loss_sum_ -= std::log(std::max(p_label, 1e-15));
    scores_.Add(scores[i], positive);
  }
  return absl::OkStatus();
}

void TestTally::Fill(uint64_t total, EpochReport* report) const {
  report->test_correct = static_cast<uint64_t>(correct_);
  report->test_total = total;
  report->test_loss_sum = scored() ? loss_sum_ : 0;
  report->test_scores = scored() ? scores_ : ScoreHistogram();
}

}  // namespace paramd
