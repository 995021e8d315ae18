// liveness.keepalive_seconds over real loopback gRPC: a client whose
// connection goes silent without closing (its host vanished) is pinged,
// found gone and cut off by the server, its open StepStream ends, and the
// server serves the rank's next stream.
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>

#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/tcp_relay.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::LocalCluster;
using testing::TcpRelay;

std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

// One step on `stream`: its reply's version.
uint64_t Step(
    grpc::ClientReaderWriter<proto::PushRequest, proto::PullResponse>& stream,
    const proto::PushRequest& push) {
  REQUIRE(stream.Write(push));
  proto::PullResponse reply;
  REQUIRE(stream.Read(&reply));
  return reply.version();
}

TEST_CASE(
    "a client gone silent without closing is found by the server's "
    "keepalive and cut off; its stream ends and the rank steps on anew",
    "[integration][keepalive][stream]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  o.layers = "[20, 10]";
  o.policy = "async";
  JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  config.liveness.keepalive_seconds = 0.2;
  LocalCluster cluster(config);
  Shard& shard = *cluster.server(0).shard();

  TcpRelay relay(cluster.addresses()[0]);
  auto stub = proto::ParameterService::NewStub(ChannelTo(relay.address()));
  testing::RegisterOverGrpc(*stub, config, shard.plan(), 0);
  grpc::ClientContext context;
  auto stream = stub->StepStream(&context);
  CHECK(Step(*stream, testing::WholePush(shard, config.job_id, 0, 0, 0.5f)) ==
        1);

  // The client's host vanishes: no byte either way, no close. The server
  // pings, hears nothing and closes the connection.
  relay.Silence();
  REQUIRE(relay.AwaitServerClosed(absl::Seconds(30)));
  // The relay passed the close on: the client's stream is over.
  proto::PullResponse none;
  CHECK_FALSE(stream->Read(&none));
  CHECK_FALSE(stream->Finish().ok());

  // The rank, back on another connection, steps on from where it was.
  auto direct =
      proto::ParameterService::NewStub(ChannelTo(cluster.addresses()[0]));
  grpc::ClientContext again;
  auto next = direct->StepStream(&again);
  CHECK(Step(*next, testing::WholePush(shard, config.job_id, 0, 1, 0.5f)) == 2);
  REQUIRE(next->WritesDone());
  CHECK(next->Finish().ok());
  proto::ShardStatus st;
  shard.GetStatus(&st);
  CHECK(st.pushes() == 2);
}

}  // namespace
}  // namespace paramd
