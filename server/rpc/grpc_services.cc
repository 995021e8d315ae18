#include "server/rpc/grpc_services.h"

#include "common/grpc_status.h"

namespace paramd {

grpc::Status GrpcParameterService::Register(
    grpc::ServerContext*, const proto::RegisterRequest* request,
    proto::RegisterResponse* response) {
  return ToGrpcStatus(shard_->Register(*request, response));
}

grpc::Status GrpcParameterService::Push(grpc::ServerContext*,
                                        const proto::PushRequest* request,
                                        proto::PushResponse* response) {
  return ToGrpcStatus(shard_->Push(*request, response));
}

grpc::Status GrpcParameterService::Pull(grpc::ServerContext* context,
                                        const proto::PullRequest* request,
                                        proto::PullResponse* response) {
  return ToGrpcStatus(shard_->Pull(*request,
                                   absl::FromChrono(context->deadline()),
                                   [context] { return context->IsCancelled(); },
                                   response));
}

grpc::Status GrpcParameterService::Heartbeat(
    grpc::ServerContext*, const proto::HeartbeatRequest* request,
    proto::HeartbeatResponse* response) {
  return ToGrpcStatus(shard_->Heartbeat(*request, response));
}

grpc::Status GrpcParameterService::ReportEpoch(
    grpc::ServerContext*, const proto::ReportEpochRequest* request,
    proto::ReportEpochResponse*) {
  return ToGrpcStatus(shard_->ReportEpoch(*request));
}

grpc::Status GrpcStatusService::GetStatus(grpc::ServerContext*,
                                          const proto::GetStatusRequest*,
                                          proto::ShardStatus* response) {
  shard_->GetStatus(response);
  return grpc::Status::OK;
}

}  // namespace paramd
