#include "common/base/score_histogram.h"

#include <algorithm>
#include <cmath>

namespace paramd {

int ScoreHistogram::BinOf(double p) {
  if (!(p > 0)) return 0;  // Also NaN.
  if (p >= 1) return kScoreBins - 1;
  return std::min(kScoreBins - 1, static_cast<int>(p * kScoreBins));
}

void ScoreHistogram::Allocate() {
  if (!positives_.empty()) return;
  positives_.assign(kScoreBins, 0);
  negatives_.assign(kScoreBins, 0);
}

void ScoreHistogram::Add(double p, bool positive) {
  Allocate();
  ++(positive ? positives_ : negatives_)[BinOf(p)];
}

void ScoreHistogram::Merge(const ScoreHistogram& other) {
  if (other.empty()) return;
  Allocate();
  for (int b = 0; b < kScoreBins; ++b) {
    positives_[b] += other.positives_[b];
    negatives_[b] += other.negatives_[b];
  }
}

uint64_t ScoreHistogram::samples() const {
  uint64_t n = 0;
  for (size_t b = 0; b < positives_.size(); ++b) {
    n += positives_[b] + negatives_[b];
  }
  return n;
}

bool ScoreHistogram::Assign(std::vector<uint64_t> positives,
                            std::vector<uint64_t> negatives) {
  const bool none = positives.empty() && negatives.empty();
  const bool whole =
      positives.size() == kScoreBins && negatives.size() == kScoreBins;
  if (!none && !whole) return false;
  positives_ = std::move(positives);
  negatives_ = std::move(negatives);
  return true;
}

std::optional<AucEstimate> ScoreHistogram::Auc() const {
  // Pairs counted in long double: a test set of 10^7 of each class has
  // 10^14 pairs, past a double's exact integers once summed bin by bin.
  long double positives = 0, negatives = 0;
  for (size_t b = 0; b < positives_.size(); ++b) {
    positives += positives_[b];
    negatives += negatives_[b];
  }
  if (positives == 0 || negatives == 0) return std::nullopt;
  long double ordered = 0, tied = 0, negatives_below = 0;
  for (size_t b = 0; b < positives_.size(); ++b) {
    const long double pos = positives_[b], neg = negatives_[b];
    ordered += pos * negatives_below;
    tied += pos * neg;
    negatives_below += neg;
  }
  const long double pairs = positives * negatives;
  AucEstimate e;
  e.auc = static_cast<double>((ordered + tied / 2) / pairs);
  e.max_error = static_cast<double>(tied / 2 / pairs);
  return e;
}

}  // namespace paramd
