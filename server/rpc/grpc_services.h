// gRPC adapters over a Shard: each handler calls the shard, converts the
// status, replies. No policy or optimizer logic lives here.
#ifndef PARAMD_SERVER_RPC_GRPC_SERVICES_H_
#define PARAMD_SERVER_RPC_GRPC_SERVICES_H_

#include "proto/paramd.grpc.pb.h"
#include "server/shard.h"

namespace paramd {

class GrpcParameterService final : public proto::ParameterService::Service {
 public:
  explicit GrpcParameterService(Shard* shard) : shard_(shard) {}

  grpc::Status Register(grpc::ServerContext* context,
                        const proto::RegisterRequest* request,
                        proto::RegisterResponse* response) override;
  grpc::Status Push(grpc::ServerContext* context,
                    const proto::PushRequest* request,
                    proto::PushResponse* response) override;
  grpc::Status Pull(grpc::ServerContext* context,
                    const proto::PullRequest* request,
                    proto::PullResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const proto::HeartbeatRequest* request,
                         proto::HeartbeatResponse* response) override;
  grpc::Status ReportEpoch(grpc::ServerContext* context,
                           const proto::ReportEpochRequest* request,
                           proto::ReportEpochResponse* response) override;

 private:
  Shard* const shard_;
};

class GrpcStatusService final : public proto::StatusService::Service {
 public:
  explicit GrpcStatusService(const Shard* shard) : shard_(shard) {}

  grpc::Status GetStatus(grpc::ServerContext* context,
                         const proto::GetStatusRequest* request,
                         proto::ShardStatus* response) override;

 private:
  const Shard* const shard_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_GRPC_SERVICES_H_
