#include "server/rpc/grpc_services.h"

#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_frames.h"
#include "common/grpc_status.h"
#include "common/wire_format.h"

namespace paramd {
namespace {

grpc::ByteBuffer SerializeSmall(const google::protobuf::MessageLite& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

std::string GrpcParameterService::MethodName(const char* rpc) {
  return absl::StrCat("/", proto::ParameterService::service_full_name(), "/",
                      rpc);
}

template <typename Request, typename Response>
void GrpcParameterService::AddUnary(
    const char* rpc,
    grpc::Status (GrpcParameterService::*handler)(grpc::ServerContext*,
                                                  const Request*, Response*)) {
  names_.push_back(std::make_unique<std::string>(MethodName(rpc)));
  AddMethod(new grpc::internal::RpcServiceMethod(
      names_.back()->c_str(), grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<GrpcParameterService, Request,
                                           Response>(
          [handler](GrpcParameterService* service, grpc::ServerContext* context,
                    const Request* request, Response* response) {
            return (service->*handler)(context, request, response);
          },
          this)));
}

GrpcParameterService::GrpcParameterService(Shard* shard) : shard_(shard) {
  AddUnary("Register", &GrpcParameterService::Register);
  AddUnary("Push", &GrpcParameterService::Push);
  AddUnary("Pull", &GrpcParameterService::Pull);
  AddUnary("Heartbeat", &GrpcParameterService::Heartbeat);
  AddUnary("ReportEpoch", &GrpcParameterService::ReportEpoch);
}

grpc::Status GrpcParameterService::Register(
    grpc::ServerContext*, const proto::RegisterRequest* request,
    proto::RegisterResponse* response) {
  return ToGrpcStatus(shard_->Register(*request, response));
}

grpc::Status GrpcParameterService::Push(grpc::ServerContext*,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) {
  ReceivedFrame frame;
  PushView view;
  std::unique_ptr<float[]> storage;
  absl::Status s = frame.Take(*request);
  if (s.ok()) s = DecodePush(frame.segments(), &view, &storage);
  proto::PushResponse reply;
  if (s.ok()) s = shard_->Push(view, &reply);
  if (!s.ok()) return ToGrpcStatus(s);
  *response = SerializeSmall(reply);
  return grpc::Status::OK;
}

grpc::Status GrpcParameterService::Pull(grpc::ServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) {
  proto::PullRequest pull;
  grpc::Slice whole;
  if (!request->DumpToSingleSlice(&whole).ok() ||
      !pull.ParseFromArray(whole.begin(), static_cast<int>(whole.size()))) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("Pull: malformed PullRequest"));
  }
  std::shared_ptr<const ParamSnapshot> snapshot;
  absl::Status s = shard_->Pull(
      pull, absl::FromChrono(context->deadline()),
      [context] { return context->IsCancelled(); }, &snapshot);
  if (!s.ok()) return ToGrpcStatus(s);
  FrameBuilder frame(snapshot);
  frame.AddCopy(EncodePullHeader(snapshot->version));
  for (size_t i = 0; i < snapshot->params.size(); ++i) {
    const ChunkSpec& spec = shard_->store().chunk_spec(static_cast<int>(i));
    const absl::string_view data(
        reinterpret_cast<const char*>(snapshot->params[i].data()),
        snapshot->params[i].size() * sizeof(float));
    frame.AddCopy(EncodeChunkHeader(kPullChunksField, spec.tensor_id,
                                    spec.chunk_index, proto::DTYPE_FLOAT32,
                                    data.size()));
    frame.AddReference(data);
  }
  *response = frame.Finish();
  return grpc::Status::OK;
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
