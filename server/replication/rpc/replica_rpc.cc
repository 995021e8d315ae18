#include "server/replication/rpc/replica_rpc.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "server/rpc/byte_methods.h"

namespace paramd {

GrpcReplicaService::GrpcReplicaService(Shard* shard,
                                       const JobSecurity* security)
    : shard_(shard), max_replicate_bytes_(INT32_MAX), security_(security) {}

void GrpcReplicaService::AddTo(ServedMethods* methods) {
  methods->AddUnaryMember(MethodName("Replicate"), "Replicate", security_, this,
                          &GrpcReplicaService::Replicate);
  methods->AddUnaryMember(MethodName("Handover"), "Handover", security_, this,
                          &GrpcReplicaService::Handover);
}

std::string GrpcReplicaService::MethodName(const char* rpc) {
  return ServedMethods::MethodName(proto::ReplicaService::service_full_name(),
                                   rpc);
}

grpc::Status GrpcReplicaService::Replicate(grpc::ServerContext*,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) {
  ShardReplica* replica = shard_->replica();
  if (replica == nullptr) {
    return ToGrpcStatus(absl::FailedPreconditionError(
        "Replicate: this job has no replicas (replication.factor 1)"));
  }
  // The whole state: bounded by gRPC's own 2 GiB, not the small limit.
  if (absl::Status s = CheckSize("Replicate", *request, max_replicate_bytes_);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  proto::ReplicateRequest in;
  if (!ParseMessage(*request, &in)) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("Replicate: malformed ReplicateRequest (",
                     request->Length(), " bytes that do not parse)")));
  }
  proto::ReplicateResponse out;
  if (absl::Status s = replica->Replicate(&in, &out); !s.ok()) {
    return ToGrpcStatus(s);
  }
  *response = SerializeMessage(out);
  return grpc::Status::OK;
}

grpc::Status GrpcReplicaService::Handover(grpc::ServerContext*,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  return ServeMessage<proto::HandoverRequest, proto::HandoverResponse>(
      "Handover", *request, response,
      [this](const proto::HandoverRequest& r, proto::HandoverResponse* out) {
        ShardReplica* replica = shard_->replica();
        if (replica == nullptr) {
          return absl::FailedPreconditionError(
              "Handover: this job has no replicas (replication.factor 1)");
        }
        return replica->Handover(r, out);
      });
}

namespace {

std::shared_ptr<grpc::Channel> PeerChannel(const std::string& address,
                                           const JobSecurity& security) {
  grpc::ChannelArguments args;
  // A Replicate and a Handover's answer carry the shard's whole state.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Its own connection: the state does not queue behind other traffic.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return CreateJobChannel(address, security, args);
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(absl::ToInt64Microseconds(d));
}

}  // namespace

GrpcReplicaPeer::GrpcReplicaPeer(const std::string& address,
                                 const JobSecurity& security)
    : channel_(PeerChannel(address, security)),
      stub_(proto::ReplicaService::NewStub(channel_)) {}

absl::Status GrpcReplicaPeer::Replicate(const proto::ReplicateRequest& request,
                                        absl::Duration timeout,
                                        proto::ReplicateResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(In(timeout));
  return FromGrpcStatus(stub_->Replicate(&context, request, response));
}

absl::Status GrpcReplicaPeer::Handover(const proto::HandoverRequest& request,
                                       absl::Duration timeout,
                                       proto::HandoverResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(In(timeout));
  return FromGrpcStatus(stub_->Handover(&context, request, response));
}

}  // namespace paramd
