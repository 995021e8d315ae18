// TestTally (worker/test_tally.h): correct predictions from logits, and for
// two classes each sample's log loss and its score by label.
#include "worker/test_tally.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace paramd {
namespace {

TEST_CASE("test tally: two classes give loss and scores", "[evaluation]") {
  TestTally tally(2);
  REQUIRE(tally.scored());
  // Margins z1 - z0 of 2, -1, 0 and a saturated 200 (no overflow).
  const std::vector<float> logits = {0, 2, 1, 0, 3, 3, -100, 100};
  const std::vector<int32_t> y = {1, 1, 0, 0};
  tally.AddLogits(logits.data(), y.data(), 4);
  EpochReport r;
  tally.Fill(4, &r);
  CHECK(r.test_total == 4);
  // Predicted: 1, 0, 0 (ties go to the first), 1.
  CHECK(r.test_correct == 2);
  const double expected = std::log1p(std::exp(-2.0)) +
                          std::log1p(std::exp(1.0)) + std::log(2.0) + 200.0;
  CHECK(r.test_loss_sum == Approx(expected).epsilon(1e-12));
  REQUIRE(r.test_scores.samples() == 4);
  const double p0 = 1 / (1 + std::exp(-2.0)), p1 = 1 / (1 + std::exp(1.0));
  CHECK(r.test_scores.positives()[ScoreHistogram::BinOf(p0)] == 1);
  CHECK(r.test_scores.positives()[ScoreHistogram::BinOf(p1)] == 1);
  CHECK(r.test_scores.negatives()[ScoreHistogram::BinOf(0.5)] == 1);
  CHECK(r.test_scores.negatives()[kScoreBins - 1] == 1);
  // Positives at 0.88 and 0.27; negatives at 0.5 and 1.0: 1 of 4 pairs.
  CHECK(r.test_scores.Auc()->auc == 0.25);
}

TEST_CASE("test tally: more classes count correct predictions only",
          "[evaluation]") {
  TestTally tally(3);
  CHECK_FALSE(tally.scored());
  const std::vector<float> logits = {0, 1, 2, 5, 1, 0};
  const std::vector<int32_t> y = {2, 1};
  tally.AddLogits(logits.data(), y.data(), 2);
  tally.AddCorrect(4);
  EpochReport r;
  tally.Fill(12, &r);
  CHECK(r.test_correct == 5);
  CHECK(r.test_total == 12);
  CHECK(r.test_loss_sum == 0);
  CHECK(r.test_scores.empty());
}

}  // namespace
}  // namespace paramd
