// The server's conversions between the wire's protobuf messages and the
// plain structs its logic keeps (epoch reports and metrics, worker status);
// the worker's are in worker/rpc/proto_convert.h.
#ifndef PARAMD_SERVER_SHARD_PROTO_CONVERT_H_
#define PARAMD_SERVER_SHARD_PROTO_CONVERT_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "common/base/epoch_report.h"
#include "proto/paramd.pb.h"
#include "server/policy/update_policy.h"
#include "server/policy/worker_registry.h"
#include "server/shard/job_metrics.h"

namespace paramd {

EpochReport ToEpochReport(const proto::ReportEpochRequest& request);

void FillEpochMetrics(const EpochSummary& summary, proto::EpochMetrics* out);

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

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_PROTO_CONVERT_H_
