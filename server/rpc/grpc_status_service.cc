#include "server/rpc/grpc_status_service.h"

#include <utility>

#include "common/base/status_macros.h"
#include "proto/paramd.grpc.pb.h"
#include "server/rpc/byte_methods.h"

namespace paramd {

GrpcStatusService::GrpcStatusService(Shard* shard, const JobSecurity* security)
    : shard_(shard), security_(security) {}

void GrpcStatusService::AddTo(ServedMethods* methods) {
  using Handler = grpc::Status (GrpcStatusService::*)(
      grpc::ServerContext*, const grpc::ByteBuffer*, grpc::ByteBuffer*);
  for (const auto& [rpc, handler] :
       {std::pair<const char*, Handler>{"GetStatus",
                                        &GrpcStatusService::GetStatus},
        {"Checkpoint", &GrpcStatusService::Checkpoint},
        {"Trace", &GrpcStatusService::Trace},
        {"Export", &GrpcStatusService::Export}}) {
    methods->AddUnaryMember(ServedMethods::MethodName(
                                proto::StatusService::service_full_name(), rpc),
                            rpc, security_, this, handler);
  }
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

grpc::Status GrpcStatusService::Export(grpc::ServerContext*,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) {
  return ServeMessage<proto::ExportRequest, proto::ExportResponse>(
      "Export", *request, response,
      [this](const proto::ExportRequest& r, proto::ExportResponse* out) {
        ASSIGN_OR_RETURN(*out, shard_->Export(r));
        return absl::OkStatus();
      });
}

}  // namespace paramd
