// Querying the servers' status over gRPC (paramctl status, and the
// progress lines of paramctl run); tools/ctl/status_format.h prints it.
#ifndef PARAMD_TOOLS_CTL_RPC_STATUS_CLIENT_H_
#define PARAMD_TOOLS_CTL_RPC_STATUS_CLIENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/credentials.h"
#include "proto/paramd.pb.h"
#include "tools/ctl/status_format.h"

namespace paramd {

// One GetStatus call to `address`, with the job's TLS and token.
absl::StatusOr<proto::ShardStatus> QueryShardStatus(const std::string& address,
                                                    const JobSecurity& security,
                                                    absl::Duration timeout);

// One Checkpoint call to `address`: the shard writes a checkpoint now.
absl::StatusOr<proto::CheckpointResponse> RequestCheckpoint(
    const std::string& address, const JobSecurity& security,
    absl::Duration timeout);

// One Trace call to `address` (paramctl trace --job): arms `request`'s
// window and/or writes the shard's timeline.
absl::StatusOr<proto::TraceResponse> RequestTrace(
    const std::string& address, const JobSecurity& security,
    const proto::TraceRequest& request, absl::Duration timeout);

// A shard's whole export for serving (paramctl export): Export calls to
// `address` over one channel — `first` (export_id 0), then each further
// page — each handed to `take` in order; the first error stops it.
absl::Status ExportAllPages(
    const std::string& address, const JobSecurity& security,
    const proto::ExportRequest& first, absl::Duration timeout,
    const std::function<absl::Status(const proto::ExportResponse&)>& take);

// Every address, concurrently.
std::vector<ServerStatus> QueryAllStatus(
    const std::vector<std::string>& addresses, const JobSecurity& security,
    absl::Duration timeout);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_RPC_STATUS_CLIENT_H_
