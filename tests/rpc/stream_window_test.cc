// limits.stream_window_kb over real gRPC: with the smallest fixed window
// (64 KiB, the servers' bandwidth-delay probing off) a shard's push and
// pull of more than the window each step go through — flow control waits
// for window updates, it does not hang — and end bit-identical to the same
// steps under gRPC's adaptive windows.
#include <catch2/catch.hpp>
#include <vector>

#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/grpc_steps.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

TEST_CASE(
    "a fixed 64 KiB stream window carries steps larger than it, with the "
    "same result as gRPC's adaptive windows",
    "[rpc][integration][sync]") {
  testing::JobOptions o;
  o.workers = 1;
  JobConfig adaptive = testing::MakeJob(o, testing::NewTempDir());
  // The bytes travel on the stream, not through a shared segment.
  adaptive.worker.shared_memory = false;
  JobConfig fixed = adaptive;
  fixed.limits.stream_window_kb = 64;
  // Each shard's push and pull is larger than the window.
  const ModelSpec spec = BuildModelSpec(adaptive.model);
  REQUIRE(FlatLayout(spec).total * sizeof(float) / adaptive.num_shards() >
          64 * 1024);
  const std::vector<float> expected = testing::StepsOverGrpc(adaptive, 3);
  const std::vector<float> got = testing::StepsOverGrpc(fixed, 3);
  CHECK(got == expected);
}

}  // namespace
}  // namespace paramd
