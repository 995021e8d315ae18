// A worker's calls outside its StepStream — a push without a pull (unary
// Push, or a PushStream of several messages), a pull (unary, or a
// PullStream) — on a completion queue the calling thread polls
// (QueuedStream): steps taken as "push, then pull" end bit-identical to
// the same steps on the StepStream, with shards of one message and of
// several.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/wire/wire_format.h"
#include "tests/grpc_steps.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

JobConfig OneWorker(const std::string& layers) {
  testing::JobOptions o;
  o.workers = 1;
  o.layers = layers;
  JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  // The bytes travel on the calls, not through a shared segment.
  config.worker.shared_memory = false;
  return config;
}

int64_t LargestShard(const JobConfig& config) {
  const ModelSpec spec = BuildModelSpec(config.model);
  const PartitionPlan plan =
      *PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards());
  int64_t largest = 0;
  for (int s = 0; s < config.num_shards(); ++s) {
    largest = std::max<int64_t>(largest, plan.BytesOnShard(s));
  }
  return largest;
}

TEST_CASE(
    "pushes without a pull and pulls of one message each end as the same "
    "steps on the StepStream do",
    "[rpc][integration][sync]") {
  JobConfig config = OneWorker("[784, 64, 10]");
  REQUIRE(LargestShard(config) < kStreamMessageBytes);  // unary calls
  config.worker.slice_bytes = 0;  // a push is one message, not slices
  const std::vector<float> stream = testing::StepsOverGrpc(config, 3);
  const std::vector<float> apart =
      testing::StepsOverGrpc(config, 3, /*apart=*/true);
  CHECK(apart == stream);
}

TEST_CASE(
    "pushes without a pull and pulls of several messages (PushStream, "
    "PullStream) end as the same steps on the StepStream do",
    "[rpc][integration][sync][stream]") {
  const JobConfig config = OneWorker("[784, 1024, 10]");
  REQUIRE(LargestShard(config) > kStreamMessageBytes);  // streams
  const std::vector<float> stream = testing::StepsOverGrpc(config, 3);
  const std::vector<float> apart =
      testing::StepsOverGrpc(config, 3, /*apart=*/true);
  CHECK(apart == stream);
}

}  // namespace
}  // namespace paramd
