// ScoreHistogram (common/base/score_histogram.h): bins, merging, and the
// AUC it gives against the exact AUC of the same scores, within the
// bound it states.
#include "common/base/score_histogram.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace paramd {
namespace {

// The exact AUC by counting every (positive, negative) pair, ties half.
double PairsAuc(const std::vector<double>& pos,
                const std::vector<double>& neg) {
  double ordered = 0;
  for (double p : pos) {
    for (double n : neg) ordered += p > n ? 1.0 : p == n ? 0.5 : 0.0;
  }
  return ordered / (static_cast<double>(pos.size()) * neg.size());
}

TEST_CASE("score histogram: bins of [0, 1], the ends and NaN clamped",
          "[auc]") {
  CHECK(ScoreHistogram::BinOf(0.0) == 0);
  CHECK(ScoreHistogram::BinOf(-0.5) == 0);
  CHECK(ScoreHistogram::BinOf(std::nan("")) == 0);
  CHECK(ScoreHistogram::BinOf(1.0 / kScoreBins) == 1);
  CHECK(ScoreHistogram::BinOf(0.5) == kScoreBins / 2);
  CHECK(ScoreHistogram::BinOf(std::nextafter(1.0, 0.0)) == kScoreBins - 1);
  CHECK(ScoreHistogram::BinOf(1.0) == kScoreBins - 1);
  CHECK(ScoreHistogram::BinOf(7.0) == kScoreBins - 1);
}

TEST_CASE("score histogram: no AUC without both classes", "[auc]") {
  ScoreHistogram h;
  CHECK(h.empty());
  CHECK_FALSE(h.Auc().has_value());
  h.Add(0.3, true);
  h.Add(0.9, true);
  CHECK_FALSE(h.empty());
  CHECK(h.samples() == 2);
  CHECK_FALSE(h.Auc().has_value());
  h.Add(0.1, false);
  REQUIRE(h.Auc().has_value());
  CHECK(h.Auc()->auc == 1.0);
  CHECK(h.Auc()->max_error == 0.0);
}

TEST_CASE("score histogram: ties count half, and the bound says so", "[auc]") {
  ScoreHistogram h;
  for (int i = 0; i < 10; ++i) h.Add(0.5, i % 2 == 0);
  REQUIRE(h.Auc().has_value());
  CHECK(h.Auc()->auc == 0.5);
  CHECK(h.Auc()->max_error == 0.5);
  // Perfectly wrong: every positive below every negative.
  ScoreHistogram wrong;
  wrong.Add(0.1, true);
  wrong.Add(0.9, false);
  CHECK(wrong.Auc()->auc == 0.0);
}

TEST_CASE(
    "score histogram: the AUC of random scores within its bound of "
    "the exact one",
    "[auc]") {
  std::mt19937_64 rng(7);
  for (double separation : {0.0, 0.5, 1.5}) {
    std::normal_distribution<double> noise(0, 1);
    std::vector<double> pos, neg;
    ScoreHistogram h;
    for (int i = 0; i < 3000; ++i) {
      const bool positive = i % 3 == 0;
      const double logit = noise(rng) + (positive ? separation : 0.0);
      const double p = 1 / (1 + std::exp(-logit));
      (positive ? pos : neg).push_back(p);
      h.Add(p, positive);
    }
    const double exact = PairsAuc(pos, neg);
    REQUIRE(h.Auc().has_value());
    INFO("separation " << separation << ": exact " << exact << ", binned "
                       << h.Auc()->auc << " +- " << h.Auc()->max_error);
    CHECK(std::abs(h.Auc()->auc - exact) <= h.Auc()->max_error + 1e-12);
    // 8,192 bins leave little inside one bin here.
    CHECK(h.Auc()->max_error < 5e-4);
  }
}

TEST_CASE("score histogram: merged shares give the union's AUC", "[auc]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  ScoreHistogram a, b, whole;
  for (int i = 0; i < 2000; ++i) {
    const double p = u(rng);
    const bool positive = u(rng) < p;
    (i % 2 == 0 ? a : b).Add(p, positive);
    whole.Add(p, positive);
  }
  ScoreHistogram merged;
  merged.Merge(ScoreHistogram());  // An empty share adds nothing.
  CHECK(merged.empty());
  merged.Merge(a);
  merged.Merge(b);
  CHECK(merged.positives() == whole.positives());
  CHECK(merged.negatives() == whole.negatives());
  CHECK(merged.Auc()->auc == whole.Auc()->auc);
}

TEST_CASE("score histogram: bins assigned whole or not at all", "[auc]") {
  ScoreHistogram h;
  h.Add(0.2, true);
  CHECK_FALSE(h.Assign(std::vector<uint64_t>(kScoreBins - 1),
                       std::vector<uint64_t>(kScoreBins)));
  CHECK_FALSE(h.Assign(std::vector<uint64_t>(kScoreBins), {}));
  CHECK(h.samples() == 1);  // Unchanged.
  std::vector<uint64_t> pos(kScoreBins), neg(kScoreBins);
  pos[kScoreBins - 1] = 3;
  neg[0] = 4;
  REQUIRE(h.Assign(pos, neg));
  CHECK(h.samples() == 7);
  CHECK(h.Auc()->auc == 1.0);
  REQUIRE(h.Assign({}, {}));
  CHECK(h.empty());
}

}  // namespace
}  // namespace paramd
