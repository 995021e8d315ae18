#include "server/rpc/parameter_server.h"

#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/coord/rpc/etcd_shard_fence.h"

namespace paramd {
namespace {

// The channel arguments of every connection a server accepts: ports not
// shared, keepalive, no receive limit of gRPC's own, the steps' window.
void SetConnectionArguments(const JobConfig& config,
                            grpc::ServerBuilder* builder) {
  // gRPC shares ports (SO_REUSEPORT) by default: a second server on a port
  // in use would split the first one's connections. A port in use is an
  // error instead.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client whose host vanished without closing its connections would
  // hold its calls (and a StepStream its reply and reactor) for gRPC's two
  // hours: every connection is pinged each liveness.keepalive_seconds, also
  // with no call open and no data sent, and closed when a ping goes
  // unanswered for that long again.
  const int keepalive_ms = static_cast<int>(std::clamp<double>(
      config.liveness.keepalive_seconds * 1000, 1, INT32_MAX));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A replica's channel to its peer pings it as often (GrpcReplicaPeer):
  // never taken for abuse.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // The handlers check the size of every message they read (and answer
  // RESOURCE_EXHAUSTED). gRPC's own receive limit stays off: when it fails
  // a read, a streaming handler cannot tell that from the client's end of
  // stream, and would apply a push whose call then fails.
  builder->SetMaxReceiveMessageSize(-1);
  // limits.stream_window_kb: a fixed window, no bandwidth-delay probing
  // (measured faster across 1 Gbit/s links, slower across faster ones:
  // docs/job-file.md). A likely cause, not shown: the probe's pings and
  // the window updates travel behind the other direction's bulk, as a
  // step's pushes and replies flow at once.
  if (const int64_t kb = config.limits.stream_window_kb; kb > 0) {
    builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder->AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                                static_cast<int>(kb * 1024));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(
    const JobConfig& config, int shard_id, Clock* clock,
    const ShardOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard,
                   Shard::Create(config, shard_id, clock, options));
  auto server =
      std::unique_ptr<ParameterServer>(new ParameterServer(std::move(shard)));
  // Leases are checked several times per lease, at most every 100 ms.
  server->tick_every_ =
      std::min(absl::Milliseconds(100),
               absl::Seconds(config.liveness.lease_seconds) / 10);
  return server;
}

ParameterServer::ParameterServer(std::unique_ptr<Shard> shard)
    : shard_(std::move(shard)),
      faults_(shard_->config().testing),
      parameter_service_(shard_.get(), &security_, &faults_),
      status_service_(shard_.get(), &security_) {}

ParameterServer::~ParameterServer() { Shutdown(); }

absl::StatusOr<int> ParameterServer::Start(const std::string& address) {
  ASSIGN_OR_RETURN(security_, LoadSecurity(shard_->config().security));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, MakeServerCredentials(security_), &port);
  SetConnectionArguments(shard_->config(), &builder);
  builder.SetMaxSendMessageSize(static_cast<int>(
      std::min<int64_t>(shard_->max_message_bytes(), INT32_MAX)));
  // What gRPC may hold for this server's connections: past it, gRPC
  // refuses calls (RESOURCE_EXHAUSTED) instead of reading more.
  grpc::ResourceQuota quota("paramd-server");
  quota.Resize(static_cast<size_t>(shard_->transport_memory_bytes()));
  builder.SetResourceQuota(quota);
  parameter_service_.AddTo(&methods_);
  status_service_.AddTo(&methods_);
  if (shard_->replica() != nullptr) {
    replica_service_ =
        std::make_unique<GrpcReplicaService>(shard_.get(), &security_);
    replica_service_->AddTo(&methods_);
  }
  // Every method on the async API: one completion queue, one thread.
  RETURN_IF_ERROR(methods_.Serve(
      &builder, &generic_, &port, address,
      security_.tls ? ", or security.tls_cert and tls_key are not a "
                      "matching certificate and key"
                    : "",
      &server_, &calls_));
  port_ = port;
  ticker_ = std::thread([this] { TickLoop(); });
  return port;
}

absl::Status ParameterServer::StartReplica(const std::string& own_address,
                                           const std::string& peer,
                                           std::function<void()> on_replaced) {
  ShardReplica* replica = shard_->replica();
  if (replica == nullptr) {
    return absl::FailedPreconditionError(
        "the job has no replicas (replication.factor 1)");
  }
  replica->SetPeer(
      [this](const std::string& address) -> std::unique_ptr<ReplicaPeer> {
        return std::make_unique<GrpcReplicaPeer>(
            address, security_,
            absl::Seconds(shard_->config().liveness.keepalive_seconds));
      },
      own_address, peer);
  replica->set_on_replaced(std::move(on_replaced));
  const JobConfig& config = shard_->config();
  if (config.coordination.enabled()) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<EtcdShardFence> fence,
        EtcdShardFence::Open(config, shard_->shard_id(), own_address));
    replica->set_fence(std::move(fence));
  }
  return replica->Start();
}

void ParameterServer::TickLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), tick_every_);
    if (stopping_) break;
    mu_.Unlock();
    shard_->Tick();
    mu_.Lock();
  }
}

void ParameterServer::Shutdown() {
  if (server_ == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  shard_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (calls_ != nullptr) calls_->Shutdown();
}

void ParameterServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace paramd
