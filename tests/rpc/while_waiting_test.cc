// StepRequest::while_waiting on the gRPC client over real sockets: a step
// runs the work once, on the calling thread, after its push has reached
// every shard (a sync round of two workers: the work itself waits until
// both shards hold rank 0's push, then completes the round with rank 1's
// step), and the next step, which has none, runs nothing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

TEST_CASE(
    "the gRPC client runs a step's while_waiting work once, on the "
    "calling thread, after the push reached the shards",
    "[worker][rpc][integration][sync]") {
  testing::JobOptions o;
  o.workers = 2;
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  REQUIRE(config.num_shards() == 2);
  testing::LocalCluster cluster(config);
  const ModelSpec spec = BuildModelSpec(config.model);
  const FlatLayout layout(spec);
  const PartitionPlan plan =
      *PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards());
  const ParameterClientFactory make =
      GrpcParameterClientFactory(cluster.addresses());
  std::unique_ptr<ParameterClient> clients[2];
  for (int rank : {0, 1}) {
    absl::StatusOr<std::unique_ptr<ParameterClient>> c =
        make(ClientSetup{&config, &plan, &layout, rank});
    REQUIRE(c.ok());
    clients[rank] = *std::move(c);
  }
  // Both register at once: a sync job's registration waits for the other.
  absl::StatusOr<uint64_t> joined[2];
  {
    std::thread other([&] { joined[1] = clients[1]->Register(); });
    joined[0] = clients[0]->Register();
    other.join();
  }
  REQUIRE(joined[0].ok());
  REQUIRE(joined[1].ok());
  REQUIRE(*joined[0] == 0);
  std::vector<float> params[2];
  for (int rank : {0, 1}) {
    params[rank].assign(static_cast<size_t>(layout.total), 0.0f);
    REQUIRE(clients[rank]->Pull(0, absl::MakeSpan(params[rank])).ok());
  }

  // Rank `rank`'s step at `clock`, a gradient of 0.25 (rank 0) or 0.5
  // (rank 1) everywhere, with `work` while it waits: the version pulled.
  auto push_pull = [&](int rank, uint64_t clock,
                       std::function<void()> work =
                           nullptr) -> absl::StatusOr<uint64_t> {
    absl::Span<float> g = clients[rank]->GradientBuffer();
    std::fill(g.begin(), g.end(), rank == 0 ? 0.25f : 0.5f);
    StepRequest request{clock, g, 1.0f, absl::MakeSpan(params[rank])};
    request.while_waiting = std::move(work);
    return StepVersion(*clients[rank], std::move(request));
  };
  const std::thread::id caller = std::this_thread::get_id();
  int runs = 0;
  auto work = [&] {
    ++runs;
    CHECK(std::this_thread::get_id() == caller);
    // Rank 0's push is in both shards, its pulls waiting for the round.
    for (int k = 0; k < 2; ++k) {
      CHECK(cluster.server(k).shard()->TEST_AwaitWaitingPulls(1, kTimeout));
    }
    absl::StatusOr<uint64_t> v1 = push_pull(1, 0);
    INFO(v1.status().ToString());
    CHECK(v1.ok());
  };
  absl::StatusOr<uint64_t> v0 = push_pull(0, 0, work);
  INFO(v0.status().ToString());
  REQUIRE(v0.ok());
  CHECK(*v0 == 1);
  CHECK(runs == 1);
  CHECK(params[0] == params[1]);  // Both hold version 1.

  // Run once: the next step runs nothing.
  std::thread other([&] { CHECK(push_pull(1, 1).ok()); });
  CHECK(push_pull(0, 1).ok());
  other.join();
  CHECK(runs == 1);
}

}  // namespace
}  // namespace paramd
