#include "server/rpc/grpc_status_service.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "proto/paramd.grpc.pb.h"
#include "server/rpc/byte_methods.h"

namespace paramd {

GrpcStatusService::GrpcStatusService(Shard* shard, const JobSecurity* security)
    : shard_(shard) {
  name_ = absl::StrCat("/", proto::StatusService::service_full_name(),
                       "/GetStatus");
  AddByteMethod(this, name_.c_str(), "GetStatus", security,
                &GrpcStatusService::GetStatus);
  checkpoint_name_ = absl::StrCat(
      "/", proto::StatusService::service_full_name(), "/Checkpoint");
  AddByteMethod(this, checkpoint_name_.c_str(), "Checkpoint", security,
                &GrpcStatusService::Checkpoint);
  trace_name_ =
      absl::StrCat("/", proto::StatusService::service_full_name(), "/Trace");
  AddByteMethod(this, trace_name_.c_str(), "Trace", security,
                &GrpcStatusService::Trace);
}

grpc::Status GrpcStatusService::GetStatus(grpc::ServerContext*,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  return ServeMessage<proto::GetStatusRequest, proto::ShardStatus>(
      "GetStatus", *request, response,
      [this](const proto::GetStatusRequest&, proto::ShardStatus* out) {
        shard_->GetStatus(out);
        return absl::OkStatus();
      });
}

grpc::Status GrpcStatusService::Checkpoint(grpc::ServerContext*,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) {
  return ServeMessage<proto::CheckpointRequest, proto::CheckpointResponse>(
      "Checkpoint", *request, response,
      [this](const proto::CheckpointRequest&, proto::CheckpointResponse* out) {
        ASSIGN_OR_RETURN(*out, shard_->CheckpointNow());
        return absl::OkStatus();
      });
}

grpc::Status GrpcStatusService::Trace(grpc::ServerContext*,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) {
  return ServeMessage<proto::TraceRequest, proto::TraceResponse>(
      "Trace", *request, response,
      [this](const proto::TraceRequest& r, proto::TraceResponse* out) {
        ASSIGN_OR_RETURN(*out, shard_->Trace(r));
        return absl::OkStatus();
      });
}

}  // namespace paramd
