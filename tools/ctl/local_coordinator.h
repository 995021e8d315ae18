// The single-member etcd `paramctl run` starts for a replicated job whose
// file names no coordinator (coordination.etcd), so that its shards'
// primaries are fenced on one machine too (docs/operations.md, "One
// primary per shard: the fence"): Debian's etcd, its data and its client
// socket in the run's folder, a child of the run's Supervisor (it stops
// with the run, after the servers).
#ifndef PARAMD_TOOLS_CTL_LOCAL_COORDINATOR_H_
#define PARAMD_TOOLS_CTL_LOCAL_COORDINATOR_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/ctl/supervisor.h"

namespace paramd {

struct LocalCoordinator {
  std::string endpoint;  // "unix:PATH", for coordination.etcd.
  int child = -1;        // Its index in the Supervisor.
};

// The `etcd` program on PATH; empty when there is none.
std::string FindEtcd();

// Starts `etcd` (FindEtcd's) with its data and socket under `dir`, as `sup`'s
// child "etcd", and returns once it serves clients. An error saying why
// when it exits first or does not serve within `timeout` (then it is
// stopped).
absl::StatusOr<LocalCoordinator> StartLocalCoordinator(Supervisor& sup,
                                                       const std::string& etcd,
                                                       const std::string& dir,
                                                       absl::Duration timeout);

// A replicated job without a coordinator: its local etcd (as
// StartLocalCoordinator) when etcd is installed, its endpoint; "" when it
// is not. `say` gets a line saying which.
absl::StatusOr<std::string> StartLocalFence(
    Supervisor& sup, const std::string& dir, absl::Duration timeout,
    const std::function<void(const std::string&)>& say);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_LOCAL_COORDINATOR_H_
