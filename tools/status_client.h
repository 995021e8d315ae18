// Querying and printing the servers' status (paramctl status, and the
// progress lines of paramctl run).
#ifndef PARAMD_TOOLS_STATUS_CLIENT_H_
#define PARAMD_TOOLS_STATUS_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/paramd.pb.h"

namespace paramd {

struct ServerStatus {
  std::string address;
  absl::StatusOr<proto::ShardStatus> status;
};

// One GetStatus call to `address`.
absl::StatusOr<proto::ShardStatus> QueryShardStatus(const std::string& address,
                                                    absl::Duration timeout);

// Every address, concurrently.
std::vector<ServerStatus> QueryAllStatus(
    const std::vector<std::string>& addresses, absl::Duration timeout);

// A readable table: one line per shard, one per worker (as the servers see
// it, summed over shards), and the job's epochs from shard 0.
std::string FormatStatusTable(const std::vector<ServerStatus>& servers);

// {"servers": [{"address": ..., "ok": true, "status": {ShardStatus as
// proto3 JSON}} | {"address": ..., "ok": false, "error": ...}]}
std::string FormatStatusJson(const std::vector<ServerStatus>& servers);

}  // namespace paramd

#endif  // PARAMD_TOOLS_STATUS_CLIENT_H_
