#include "tools/ctl/rpc/status_client.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rpc/grpc_status.h"
#include "proto/paramd.grpc.pb.h"

namespace paramd {

namespace {

// One unary call of StatusService's `method` (named `rpc` in errors).
template <typename Response, typename Request, typename Method>
absl::StatusOr<Response> CallStatusService(const std::string& address,
                                           const JobSecurity& security,
                                           const char* rpc, Method method,
                                           const Request& request,
                                           absl::Duration timeout) {
  auto stub =
      proto::StatusService::NewStub(CreateJobChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  Response response;
  grpc::Status s = ((*stub).*method)(&context, request, &response);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    return absl::Status(st.code(),
                        absl::StrCat(rpc, " to ", address, ": ", st.message()));
  }
  return response;
}

}  // namespace

absl::StatusOr<proto::ShardStatus> QueryShardStatus(const std::string& address,
                                                    const JobSecurity& security,
                                                    absl::Duration timeout) {
  return CallStatusService<proto::ShardStatus>(
      address, security, "GetStatus", &proto::StatusService::Stub::GetStatus,
      proto::GetStatusRequest(), timeout);
}

absl::StatusOr<proto::CheckpointResponse> RequestCheckpoint(
    const std::string& address, const JobSecurity& security,
    absl::Duration timeout) {
  return CallStatusService<proto::CheckpointResponse>(
      address, security, "Checkpoint", &proto::StatusService::Stub::Checkpoint,
      proto::CheckpointRequest(), timeout);
}

absl::Status ExportAllPages(
    const std::string& address, const JobSecurity& security,
    const proto::ExportRequest& first, absl::Duration timeout,
    const std::function<absl::Status(const proto::ExportResponse&)>& take) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // Page 0: every chunk of the shard.
  auto stub =
      proto::StatusService::NewStub(CreateJobChannel(address, security, args));
  proto::ExportRequest request = first;
  uint64_t pages = 1;
  for (uint64_t page = 0; page < pages; ++page) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    proto::ExportResponse response;
    if (grpc::Status s = stub->Export(&context, request, &response); !s.ok()) {
      absl::Status st = FromGrpcStatus(s);
      return absl::Status(
          st.code(), absl::StrCat("Export to ", address, ": ", st.message()));
    }
    if (page == 0) {
      pages = std::max<uint64_t>(1, response.pages());
      request = proto::ExportRequest();
      request.set_job_id(first.job_id());
      request.set_export_id(response.export_id());
    }
    request.set_page(page + 1);
    RETURN_IF_ERROR(take(response));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::TraceResponse> RequestTrace(
    const std::string& address, const JobSecurity& security,
    const proto::TraceRequest& request, absl::Duration timeout) {
  return CallStatusService<proto::TraceResponse>(
      address, security, "Trace", &proto::StatusService::Stub::Trace, request,
      timeout);
}

std::vector<ServerStatus> QueryAllStatus(
    const std::vector<std::string>& addresses, const JobSecurity& security,
    absl::Duration timeout) {
  std::vector<std::future<absl::StatusOr<proto::ShardStatus>>> pending;
  for (const std::string& a : addresses) {
    pending.push_back(std::async(std::launch::async, QueryShardStatus, a,
                                 std::cref(security), timeout));
  }
  std::vector<ServerStatus> out;
  for (size_t i = 0; i < addresses.size(); ++i) {
    out.push_back({addresses[i], pending[i].get()});
  }
  return out;
}

}  // namespace paramd
