// The worker's conversions between its plain structs and the wire's
// protobuf messages, for every client (gRPC or in process); the server's
// are in server/shard/proto_convert.h.
#ifndef PARAMD_WORKER_RPC_PROTO_CONVERT_H_
#define PARAMD_WORKER_RPC_PROTO_CONVERT_H_

#include <string>

#include "common/base/epoch_report.h"
#include "proto/paramd.pb.h"
#include "worker/parameter_client.h"

namespace paramd {

// One phase of registration (see RegisterRequest) for `setup`'s rank.
proto::RegisterRequest MakeRegisterRequest(const ClientSetup& setup, bool join,
                                           uint64_t clock, uint64_t incarnation,
                                           const std::string& launch);

proto::ReportEpochRequest ToReportEpochRequest(const EpochReport& report,
                                               const std::string& job_id,
                                               int rank);

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_PROTO_CONVERT_H_
