#include "server/rpc/waiting_pull.h"

#include <utility>

#include "absl/status/status.h"

namespace paramd {

void WaitingPull::Start(const proto::PullRequest& pull, Shard::PullDone done,
                        std::vector<int> locals) {
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
    if (!cancelled) {
      waiting_ = true;
      handle_ = 0;
    }
  }
  if (cancelled) {
    done(absl::CancelledError("Pull: the caller cancelled"));
    return;
  }
  const uint64_t handle = shard_->StartPull(
      pull,
      [this, done = std::move(done)](
          absl::StatusOr<std::shared_ptr<const ParamSnapshot>> result) {
        {
          absl::MutexLock lock(&mu_);
          waiting_ = false;
          handle_ = 0;
        }
        done(std::move(result));
      },
      std::move(locals));
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (waiting_) {
      handle_ = handle;
      cancel = cancelled_;  // Cancel came before the handle was known.
    }
  }
  if (cancel) shard_->CancelPull(handle);
}

void WaitingPull::Cancel() {
  uint64_t handle = 0;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    handle = handle_;  // 0: not in the shard yet, or ended.
  }
  // Its `done` runs there with CANCELLED (or is running already).
  if (handle != 0) shard_->CancelPull(handle);
}

}  // namespace paramd
