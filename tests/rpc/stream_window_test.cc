// limits.stream_window_kb over real gRPC: with the smallest fixed window
// (64 KiB, the servers' bandwidth-delay probing off) a shard's push and
// pull of more than the window each step go through — flow control waits
// for window updates, it does not hang — and end bit-identical to the same
// steps under gRPC's adaptive windows.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

// Three steps of one worker on `config`'s cluster: the parameters after.
std::vector<float> ThreeSteps(const JobConfig& config) {
  testing::LocalCluster cluster(config);
  const ModelSpec spec = BuildModelSpec(config.model);
  const FlatLayout layout(spec);
  const PartitionPlan plan =
      *PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards());
  absl::StatusOr<std::unique_ptr<ParameterClient>> client =
      GrpcParameterClientFactory(cluster.addresses())(
          ClientSetup{&config, &plan, &layout, 0});
  REQUIRE(client.ok());
  absl::StatusOr<uint64_t> clock = (*client)->Register();
  REQUIRE(clock.ok());
  std::vector<float> params(static_cast<size_t>(layout.total));
  REQUIRE((*client)->Pull(*clock, absl::MakeSpan(params)).ok());
  for (uint64_t c = *clock; c < *clock + 3; ++c) {
    absl::Span<float> g = (*client)->GradientBuffer();
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = 1e-3f * static_cast<float>((i + c) % 7) - params[i] * 0.01f;
    }
    absl::StatusOr<uint64_t> version =
        StepVersion(**client, {c, g, 1.0f, absl::MakeSpan(params)});
    INFO(version.status().ToString());
    REQUIRE(version.ok());
    CHECK(*version == c + 1);
  }
  return params;
}

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
  const std::vector<float> expected = ThreeSteps(adaptive);
  const std::vector<float> got = ThreeSteps(fixed);
  CHECK(got == expected);
}

}  // namespace
}  // namespace paramd
