// What paramctl run reports when a job ends (tools/ctl/run_report.h).
#include "tools/ctl/run_report.h"

#include <catch2/catch.hpp>

#include "absl/status/status.h"

namespace paramd {
namespace {

ServerStatus Shard(uint64_t pushes, uint64_t wire, uint64_t float32) {
  proto::ShardStatus st;
  st.set_pushes(pushes);
  st.set_bytes_in(wire);
  st.set_bytes_in_float32(float32);
  return ServerStatus{"127.0.0.1:1", st};
}

TEST_CASE("push bytes per worker step sum the shards' averages", "[report]") {
  const PushBytes p =
      PushBytesPerStep({Shard(10, 1000, 4000), Shard(20, 600, 2400)});
  CHECK(p.wire == 130);     // 100 + 30
  CHECK(p.float32 == 520);  // 400 + 120
  CHECK(PushBytesPhrase(p) ==
        ", pushes 0.1 KB per worker step (25.0% of float32)");
  // A shard that did not answer, or has no push: unknown, not a part sum.
  ServerStatus gone{"127.0.0.1:2", absl::UnavailableError("down")};
  CHECK(PushBytesPerStep({Shard(10, 1000, 4000), gone}).wire == 0);
  CHECK(PushBytesPerStep({Shard(0, 0, 0)}).wire == 0);
  CHECK(PushBytesPhrase(PushBytes()).empty());
}

TEST_CASE(
    "a binary classifier's epoch gets its AUC in the line and the "
    "summary",
    "[report]") {
  proto::EpochMetrics e;
  e.set_epoch(1);
  e.set_test_accuracy(0.75);
  CHECK(ScorePhrase(e).empty());
  e.set_test_scored(true);
  e.set_test_auc(0.71234);
  e.set_test_auc_error(0.00002);
  e.set_test_log_loss(0.5);
  CHECK(ScorePhrase(e) == "  AUC 0.7123  log loss 0.5000");
  JobConfig config;
  config.job_id = "clicks";
  config.training.epochs = 1;
  const std::string json =
      SummaryJson(config, {{1, e}}, 2.0, PushBytes(), 0, {});
  CHECK_THAT(json, Catch::Contains("\"test_accuracy\": 0.750000, "
                                   "\"test_auc\": 0.712340, "
                                   "\"test_auc_error\": 0.000020, "
                                   "\"test_log_loss\": 0.500000, "));
}

TEST_CASE("the median epoch's samples/s", "[report]") {
  std::map<int, proto::EpochMetrics> epochs;
  CHECK(MedianSamplesPerSecond(epochs) == 0);
  for (double v : {300.0, 100.0, 200.0}) {
    epochs[static_cast<int>(epochs.size()) + 1].set_samples_per_second(v);
  }
  CHECK(MedianSamplesPerSecond(epochs) == 200);
  epochs[4].set_samples_per_second(1000);
  CHECK(MedianSamplesPerSecond(epochs) == 250);
}

}  // namespace
}  // namespace paramd
