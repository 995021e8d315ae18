// A worker's registration over real gRPC when the server it asks answers
// UNAVAILABLE, as a primary that learned it was replaced does: with a
// backup for the shard the registration goes there and succeeds; without
// one it fails with that answer.
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

// A server of one shard that was replaced: every Register is refused as
// the real one refuses it then.
class ReplacedServer final : public proto::ParameterService::Service {
 public:
  ReplacedServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~ReplacedServer() override { server_->Shutdown(); }

  grpc::Status Register(grpc::ServerContext*, const proto::RegisterRequest*,
                        proto::RegisterResponse*) override {
    ++registers_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "shard 0: this server was replaced by its backup; "
                        "ask it");
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int registers() const { return registers_.load(); }

 private:
  int port_ = 0;
  std::atomic<int> registers_{0};
  std::unique_ptr<grpc::Server> server_;
};

TEST_CASE("a registration a replaced server refuses goes to the shard's backup",
          "[worker][rpc][replication][integration]") {
  testing::JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  const JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  testing::LocalCluster backup(config);
  ReplacedServer replaced;
  const ModelSpec spec = BuildModelSpec(config.model);
  const FlatLayout layout(spec);
  const PartitionPlan plan =
      *PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards());
  const bool with_backup = GENERATE(true, false);
  GrpcClientOptions options;
  options.connect_timeout = absl::Seconds(30);
  if (with_backup) options.backups = {backup.addresses()[0]};
  absl::StatusOr<std::unique_ptr<ParameterClient>> client =
      GrpcParameterClientFactory({replaced.address()}, options)(
          ClientSetup{&config, &plan, &layout, 0});
  REQUIRE(client.ok());
  const absl::StatusOr<uint64_t> joined = (*client)->Register();
  CHECK(replaced.registers() >= 1);
  if (!with_backup) {
    INFO(joined.status());
    CHECK(absl::IsUnavailable(joined.status()));
    return;
  }
  INFO(joined.status());
  REQUIRE(joined.ok());
  CHECK(*joined == 0);
  // The shard is read at the backup now.
  std::vector<float> params(static_cast<size_t>(layout.total));
  CHECK((*client)->Pull(0, absl::MakeSpan(params)).ok());
}

}  // namespace
}  // namespace paramd
