#include "tests/local_cluster.h"

#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>
#include <vector>

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

ShardClient::ShardClient(const JobConfig& config, LocalCluster& cluster)
    : config(config),
      shard(*cluster.server(0).shard()),
      stub(proto::ParameterService::NewStub(grpc::CreateChannel(
          cluster.addresses()[0], grpc::InsecureChannelCredentials()))) {}

proto::PullResponse ShardClient::Pull(uint32_t rank, uint64_t clock) {
  proto::PullRequest req;
  req.set_job_id(config.job_id);
  req.set_rank(rank);
  req.set_clock(clock);
  proto::PullResponse resp;
  grpc::ClientContext c;
  const grpc::Status s = stub->Pull(&c, req, &resp);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return resp;
}

proto::PushRequest ShardClient::Gradient(uint32_t rank, uint64_t clock,
                                         float value, float step) const {
  proto::PushRequest push;
  push.set_job_id(config.job_id);
  push.set_rank(rank);
  push.set_clock(clock);
  int k = 0;
  for (const int global : shard.plan().ChunksOfShard(0)) {
    const ChunkSpec& spec = shard.plan().chunks()[global];
    proto::TensorChunk* g = push.add_chunks();
    g->set_tensor_id(spec.tensor_id);
    g->set_chunk_index(spec.chunk_index);
    g->set_dtype(proto::DTYPE_FLOAT32);
    std::vector<float> v(spec.length, value + step * static_cast<float>(k++));
    g->set_data(v.data(), v.size() * sizeof(float));
  }
  return push;
}

grpc::Status ShardClient::PushPull(const proto::PushRequest& push,
                                   proto::PullResponse* out) {
  grpc::ClientContext c;
  return stub->PushPull(&c, push, out);
}

proto::ShardStatus ShardClient::Status() {
  proto::ShardStatus st;
  shard.GetStatus(&st);
  return st;
}

void ShardClient::Register(uint32_t rank) {
  RegisterOverGrpc(*stub, config, shard.plan(), rank);
}

}  // namespace paramd::testing
