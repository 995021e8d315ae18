// The worker's conversions between its plain structs and the wire's
// protobuf messages; the server's are in server/proto_convert.h.
#ifndef PARAMD_WORKER_RPC_PROTO_CONVERT_H_
#define PARAMD_WORKER_RPC_PROTO_CONVERT_H_

#include <string>

#include "common/epoch_report.h"
#include "proto/paramd.pb.h"

namespace paramd {

proto::ReportEpochRequest ToReportEpochRequest(const EpochReport& report,
                                               const std::string& job_id,
                                               int rank);

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_PROTO_CONVERT_H_
