#include "server/replication/rpc/replica_rpc.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
                                           const JobSecurity& security,
                                           absl::Duration keepalive) {
  grpc::ChannelArguments args;
  // A Replicate and a Handover's answer carry the shard's whole state.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Its own connection: the state does not queue behind other traffic.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A connection to a vanished host is found dead by a ping it does not
  // answer, and closed (the calls on it end).
  const int keepalive_ms = static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(keepalive), 1, INT32_MAX));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
  return CreateJobChannel(address, security, args);
}

// A unary call of the peer's, `start`ed on gRPC's callback API, that this
// thread waits for until `timeout` at most (GrpcReplicaPeer says why);
// the call's state is shared with its callback, which may run later.
template <typename Request, typename Response, typename Start>
absl::Status CallWithin(std::shared_ptr<const Request> request,
                        absl::Duration timeout, Response* response,
                        const Start& start) {
  struct Call {
    grpc::ClientContext context;
    std::shared_ptr<const Request> request;
    Response response;
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    grpc::Status status ABSL_GUARDED_BY(mu);
  };
  auto call = std::make_shared<Call>();
  call->request = std::move(request);
  call->context.set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
  start(&call->context, call->request.get(), &call->response,
        [call](grpc::Status s) {
          absl::MutexLock lock(&call->mu);
          call->status = std::move(s);
          call->done = true;
        });
  absl::MutexLock lock(&call->mu);
  if (!call->mu.AwaitWithTimeout(absl::Condition(&call->done), timeout)) {
    call->context.TryCancel();
    return absl::DeadlineExceededError(
        absl::StrCat("no answer within ", absl::FormatDuration(timeout),
                     " (its connection may hang: the call is left to gRPC)"));
  }
  if (call->status.ok()) *response = std::move(call->response);
  return FromGrpcStatus(call->status);
}

}  // namespace

GrpcReplicaPeer::GrpcReplicaPeer(const std::string& address,
                                 const JobSecurity& security,
                                 absl::Duration keepalive)
    : channel_(PeerChannel(address, security, keepalive)),
      stub_(proto::ReplicaService::NewStub(channel_)) {}

absl::Status GrpcReplicaPeer::Replicate(
    std::shared_ptr<const proto::ReplicateRequest> request,
    absl::Duration timeout, proto::ReplicateResponse* response) {
  return CallWithin(std::move(request), timeout, response,
                    [this](grpc::ClientContext* context,
                           const proto::ReplicateRequest* request,
                           proto::ReplicateResponse* response,
                           std::function<void(grpc::Status)> done) {
                      stub_->async()->Replicate(context, request, response,
                                                std::move(done));
                    });
}

absl::Status GrpcReplicaPeer::Handover(const proto::HandoverRequest& request,
                                       absl::Duration timeout,
                                       proto::HandoverResponse* response) {
  return CallWithin(std::make_shared<const proto::HandoverRequest>(request),
                    timeout, response,
                    [this](grpc::ClientContext* context,
                           const proto::HandoverRequest* request,
                           proto::HandoverResponse* response,
                           std::function<void(grpc::Status)> done) {
                      stub_->async()->Handover(context, request, response,
                                               std::move(done));
                    });
}

}  // namespace paramd
