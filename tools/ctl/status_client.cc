#include "tools/ctl/status_client.h"

#include <grpcpp/create_channel.h>

#include <future>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "proto/paramd.grpc.pb.h"

namespace paramd {

absl::StatusOr<proto::ShardStatus> QueryShardStatus(const std::string& address,
                                                    const JobSecurity& security,
                                                    absl::Duration timeout) {
  auto channel = CreateJobChannel(address, security);
  auto stub = proto::StatusService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  proto::GetStatusRequest request;
  proto::ShardStatus response;
  grpc::Status s = stub->GetStatus(&context, request, &response);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    return absl::Status(
        st.code(), absl::StrCat("GetStatus to ", address, ": ", st.message()));
  }
  return response;
}

absl::StatusOr<proto::CheckpointResponse> RequestCheckpoint(
    const std::string& address, const JobSecurity& security,
    absl::Duration timeout) {
  auto stub =
      proto::StatusService::NewStub(CreateJobChannel(address, security));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  proto::CheckpointResponse response;
  grpc::Status s =
      stub->Checkpoint(&context, proto::CheckpointRequest(), &response);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    return absl::Status(
        st.code(), absl::StrCat("Checkpoint to ", address, ": ", st.message()));
  }
  return response;
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
