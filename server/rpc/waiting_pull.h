// WaitingPull: the one pull a reactor (server/rpc/*_reactor) has waiting
// in the shard without a thread (Shard::StartPull), and its cancellation
// from gRPC's OnCancel, which may come at any time: before the pull is
// started, while it waits, or after it ended.
//
// Thread-safe: Start and its `done` run on the call's threads, Cancel on
// whichever thread gRPC reports the cancellation.
#ifndef PARAMD_SERVER_RPC_WAITING_PULL_H_
#define PARAMD_SERVER_RPC_WAITING_PULL_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/paramd.pb.h"
#include "server/shard/shard.h"

namespace paramd {

class WaitingPull {
 public:
  // `shard` outlives this.
  explicit WaitingPull(Shard* shard) : shard_(shard) {}

  // Starts `pull` (one at a time): `done` runs once — here when it may be
  // served at once, else on the thread whose push made it readable, or
  // with CANCELLED once Cancel was called (here, if it was before).
  // With `locals`, a pull of those chunks only (Shard::StartPull).
  void Start(const proto::PullRequest& pull, Shard::PullDone done,
             std::vector<int> locals = {}) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the waiting pull with CANCELLED, and every later Start at once.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Shard* const shard_;
  absl::Mutex mu_;
  bool waiting_ ABSL_GUARDED_BY(mu_) = false;  // Started, `done` not run.
  uint64_t handle_ ABSL_GUARDED_BY(mu_) = 0;   // Its handle, once known.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_WAITING_PULL_H_
