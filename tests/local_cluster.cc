#include "tests/local_cluster.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace paramd::testing {

LocalCluster::LocalCluster(const JobConfig& config, Clock* clock) {
  for (int k = 0; k < config.num_shards(); ++k) {
    auto server = ParameterServer::Create(config, k, clock);
    INFO(server.status().ToString());
    REQUIRE(server.ok());
    absl::StatusOr<int> port = (*server)->Start("127.0.0.1:0");
    INFO(port.status().ToString());
    REQUIRE(port.ok());
    addresses_.push_back(absl::StrCat("127.0.0.1:", *port));
    servers_.push_back(*std::move(server));
  }
}

LocalCluster::~LocalCluster() {
  for (auto& s : servers_) s->Shutdown();
  for (auto& s : servers_) s->Wait();
}

void RegisterOverGrpc(proto::ParameterService::Stub& stub,
                      const JobConfig& config, const PartitionPlan& plan,
                      uint32_t rank) {
  for (bool join : {false, true}) {
    proto::RegisterRequest reg;
    reg.set_job_id(config.job_id);
    reg.set_rank(rank);
    reg.set_plan_fingerprint(plan.fingerprint());
    reg.set_join(join);
    proto::RegisterResponse resp;
    grpc::ClientContext c;
    const grpc::Status s = stub.Register(&c, reg, &resp);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
}

}  // namespace paramd::testing
