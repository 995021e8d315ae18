// The one place that converts between absl::Status and grpc::Status.
// Codes map one to one (both follow google.rpc.Code), so a caller reads the
// same code the logic chose: Unavailable to retry the call, Aborted to retry
// at a higher level, FailedPrecondition to fix state first.
#ifndef PARAMD_COMMON_RPC_GRPC_STATUS_H_
#define PARAMD_COMMON_RPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace paramd {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace paramd

#endif  // PARAMD_COMMON_RPC_GRPC_STATUS_H_
