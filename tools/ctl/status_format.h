// The servers' status as text: the table of paramctl status (and the
// progress lines of paramctl run) and its JSON form. Plain C++ over the
// protobuf messages; the gRPC queries are in tools/ctl/rpc/status_client.h.
#ifndef PARAMD_TOOLS_CTL_STATUS_FORMAT_H_
#define PARAMD_TOOLS_CTL_STATUS_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/coord/members.h"
#include "proto/paramd.pb.h"

namespace paramd {

// One server's answer: its status, or why there is none.
struct ServerStatus {
  std::string address;
  absl::StatusOr<proto::ShardStatus> status;
};

// A readable table: the job's header line, one line per shard, one per
// worker (as the first shard that answered sees it, traffic summed over
// shards), the pulls waiting now, and the job's epochs from shard 0.
std::string FormatStatusTable(const std::vector<ServerStatus>& servers);

// replication.factor 2: `by_slot` holds every shard's primary (slots
// 0..n-1), then its backup (n..2n-1). ServingReplicas picks, per shard, the
// status of the replica that serves it now (the primary's when none says
// so); ReplicaLines says what each replica is ("REPLICAS": role, term,
// sync and lag, the version a backup holds).
std::vector<ServerStatus> ServingReplicas(
    const std::vector<ServerStatus>& by_slot, int num_shards);
std::string ReplicaLines(const std::vector<ServerStatus>& by_slot,
                         int num_shards);

// coordination.etcd: the job's members as its coordinator lists them
// ("MEMBERS": kind, shard or rank, address, host, pid).
std::string MemberLines(const std::vector<JobMember>& members);

// {"servers": [{"address": ..., "ok": true, "status": {ShardStatus as
// proto3 JSON}} | {"address": ..., "ok": false, "error": ...}]}, and with
// `members` (coordination.etcd) "members": [{"kind", "id", "address",
// "host", "pid"}], or "members_error" when they could not be read.
std::string FormatStatusJson(
    const std::vector<ServerStatus>& servers,
    const absl::StatusOr<std::vector<JobMember>>* members = nullptr);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_STATUS_FORMAT_H_
