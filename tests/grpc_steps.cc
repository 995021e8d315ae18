#include "tests/grpc_steps.h"

#include <catch2/catch.hpp>
#include <memory>
#include <utility>

#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/local_cluster.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd::testing {

std::vector<float> StepsOverGrpc(const JobConfig& config, int steps,
                                 bool apart) {
  LocalCluster cluster(config);
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
  for (uint64_t c = *clock; c < *clock + steps; ++c) {
    absl::Span<float> g = (*client)->GradientBuffer();
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = 1e-3f * static_cast<float>((i + c) % 7) - params[i] * 0.01f;
    }
    StepRequest request{c, g, 1.0f, absl::MakeSpan(params)};
    request.push_only = apart;
    absl::StatusOr<StepReport> report = (*client)->Step(std::move(request));
    INFO(report.status().ToString());
    REQUIRE(report.ok());
    CHECK(report->version == c + 1);
    if (apart) {
      absl::StatusOr<uint64_t> pulled =
          (*client)->Pull(c + 1, absl::MakeSpan(params));
      INFO(pulled.status().ToString());
      REQUIRE(pulled.ok());
      CHECK(*pulled == c + 1);
    }
  }
  return params;
}

}  // namespace paramd::testing
