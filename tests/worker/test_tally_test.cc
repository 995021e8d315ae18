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

TEST_CASE("test tally: a framework worker's probabilities, checked first",
          "[evaluation]") {
  TestTally tally(2);
  const std::vector<double> p = {0.9, 0.2, 0.4, 0.6, 0.0};
  const std::vector<int64_t> y = {1, 0, 1, 0, 1};
  // Nothing is added from a call that is refused.
  absl::Status s = tally.AddProbabilities({0.5, 1.5}, {0, 1});
  CHECK(s.message() == "scores[1]: 1.5 is not a probability in [0, 1]");
  s = tally.AddProbabilities({0.5, std::nan("")}, {0, 1});
  CHECK(absl::IsInvalidArgument(s));
  s = tally.AddProbabilities({0.5, 0.5}, {0, 2});
  CHECK(s.message() == "labels[1]: 2 is not 0 or 1");
  s = tally.AddProbabilities({0.5}, {0, 1});
  CHECK(s.message() == "scores: 1 of them for 2 labels");
  REQUIRE(tally.AddProbabilities(p, y).ok());
  EpochReport r;
  tally.Fill(5, &r);
  CHECK(r.test_correct == 2);  // 0.9 and 0.2.
  // -log of 0.9, 0.8, 0.4, 0.4 and of 0, taken as 1e-15.
  CHECK(r.test_loss_sum ==
        Approx(-std::log(0.9 * 0.8 * 0.4 * 0.4) - std::log(1e-15)));
  REQUIRE(r.test_scores.samples() == 5);
  // Positives 0.9, 0.4, 0.0 against negatives 0.2, 0.6: 3 of 6 pairs.
  CHECK(r.test_scores.Auc()->auc == 0.5);
  CHECK(absl::IsInvalidArgument(TestTally(10).AddProbabilities(p, y)));
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
