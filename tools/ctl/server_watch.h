// ServerWatch: paramctl run's watch over servers that stop answering
// without dying (SIGSTOP, a hung process): one that has answered no status
// call for longer than liveness.lease_seconds — counted from its last
// answer, or from its (re)start — is reported, so that the run kills it
// and restarts it from its checkpoint as if it had died. A worker silent
// that long has lost its lease on every shard already; a server is given
// the same time. (Kubernetes' liveness probe on /healthz does the same for
// the pods of paramctl k8s.)
//
// Thread-compatible: the run's supervising loop uses it.
#ifndef PARAMD_TOOLS_CTL_SERVER_WATCH_H_
#define PARAMD_TOOLS_CTL_SERVER_WATCH_H_

#include <vector>

#include "absl/time/time.h"

namespace paramd {

class ServerWatch {
 public:
  ServerWatch(int servers, absl::Duration lease);

  // Server `shard` (re)started at `now`: its silence counts from then.
  void Started(int shard, absl::Time now);
  // One round of status calls at `now`: answered[shard] says whether the
  // server answered; `running[shard]` whether it is running at all (one
  // that is not is not watched until Started). Returns the running
  // servers silent for longer than the lease.
  std::vector<int> Observe(const std::vector<bool>& answered,
                           const std::vector<bool>& running, absl::Time now);
  // How long `shard` has been silent at `now`.
  absl::Duration Silence(int shard, absl::Time now) const {
    return now - last_heard_[shard];
  }
  absl::Duration lease() const { return lease_; }

 private:
  const absl::Duration lease_;
  std::vector<absl::Time> last_heard_;  // By shard.
};

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_SERVER_WATCH_H_
