// The server's conversions between the wire's protobuf messages and the
// plain structs its logic keeps (requests as the views the shard checks,
// replies, epoch reports and metrics, worker status, the state replicas
// ship); the worker's are in worker/rpc/proto_convert.h.
#ifndef PARAMD_SERVER_SHARD_PROTO_CONVERT_H_
#define PARAMD_SERVER_SHARD_PROTO_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/base/epoch_report.h"
#include "common/metrics/histogram.h"
#include "common/wire/row_wire.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "server/policy/update_policy.h"
#include "server/policy/worker_registry.h"
#include "server/shard/shard_rows.h"
#include "server/stats/job_metrics.h"
#include "server/store/shard_store.h"

namespace paramd {

// Views of a protobuf request, as the gRPC service decodes them from the
// wire (common/wire); they reference `request`, which must outlive them.
PushView ToPushView(const proto::PushRequest& request);
PullRowsView ToPullRowsView(const proto::PullRowsRequest& request);

// A PullResponse with every chunk of `snapshot` (the store's chunks, in
// local order), as float32 or, with `half`, float16.
void FillPullResponse(const ParamSnapshot& snapshot, const ShardStore& store,
                      bool half, proto::PullResponse* out);
void FillPullRowsResponse(const RowsReply& reply, proto::PullRowsResponse* out);

EpochReport ToEpochReport(const proto::ReportEpochRequest& request);

void FillEpochMetrics(const EpochSummary& summary, proto::EpochMetrics* out);

void FillHistogram(const HistogramSnapshot& snapshot,
                   proto::CountHistogram* out);

// Rank `rank`'s row of the status: what the registry heard from it and
// where the policy has it; `fastest_clock` is the largest clock of any
// rank, for its staleness.
void FillWorkerStatus(int rank, const WorkerInfo& info,
                      const PolicyWorker& policy, uint64_t fastest_clock,
                      absl::Time now, proto::WorkerStatus* out);

// Every rank's row of the status (`workers` and `clocks` by rank), the
// totals over ranks, and the epoch summaries of the ranks an epoch waits
// for (live or finished).
void FillWorkersStatus(const std::vector<WorkerInfo>& workers,
                       const std::vector<PolicyWorker>& clocks,
                       const JobMetrics& metrics, absl::Time now,
                       proto::ShardStatus* status);

// The shard's state as one replica ships it to the other: the policy's
// capture (`state`, whose store bytes are moved, not copied: they are most
// of a step's bytes) with each rank's registration in `workers` and the
// job's epoch reports (`metrics_state`, JobMetrics::SaveState).
void FillReplicaState(uint64_t plan_fingerprint, const char* policy,
                      PolicyState* state, const WorkerRegistry& workers,
                      std::string metrics_state, proto::ReplicaState* out);
// The policy's part of a shipped state (the rest a backup installs
// itself: registrations, liveness, epoch reports).
PolicyState ToPolicyState(const proto::ReplicaState& held);

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_PROTO_CONVERT_H_
