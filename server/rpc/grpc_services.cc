#include "server/rpc/grpc_services.h"

#include <algorithm>
#include <chrono>

#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace paramd {
namespace {

// A blocked pull re-checks whether its caller went away this often.
constexpr absl::Duration kCancelCheck = absl::Milliseconds(200);

}  // namespace

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
  const absl::Time deadline = absl::FromChrono(context->deadline());
  while (true) {
    // Wait in slices so that a caller who gave up frees this thread.
    const absl::Time slice = std::min(deadline, absl::Now() + kCancelCheck);
    absl::Status s = shard_->Pull(*request, slice, response);
    if (!absl::IsDeadlineExceeded(s)) return ToGrpcStatus(s);
    if (context->IsCancelled() || absl::Now() >= deadline) {
      return ToGrpcStatus(s);
    }
  }
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
