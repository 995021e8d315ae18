// The job's coordinator as its processes reach it: a client of the etcd
// members of coordination.etcd whose calls are answered well within the
// job's leases (coordination.lease_seconds).
#ifndef PARAMD_COMMON_COORD_RPC_COORDINATOR_H_
#define PARAMD_COMMON_COORD_RPC_COORDINATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "common/coord/rpc/etcd_client.h"

namespace paramd {

// A client of `coordination`'s etcd, each call's deadline a third of its
// lease (at most 5 s): a renewal late by more could not keep the lease.
// INVALID_ARGUMENT naming coordination.etcd when its list is not one of
// endpoints.
absl::StatusOr<std::unique_ptr<EtcdClient>> ConnectCoordinator(
    const CoordinationConfig& coordination);

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_RPC_COORDINATOR_H_
