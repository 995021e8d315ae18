#include "server/guards/call_limiter.h"

#include "absl/strings/str_cat.h"

namespace paramd {

CallLimiter::CallLimiter(int num_workers, int limit, int shard)
    : limit_(limit), shard_(shard), inside_(num_workers, 0) {}

absl::Status CallLimiter::Enter(const char* rpc, int rank) {
  absl::MutexLock lock(&mu_);
  if (inside_[rank] >= limit_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        rpc, ": rank ", rank, " already has ", inside_[rank],
        " pushes and pulls in shard ", shard_,
        ", the limit (limits.max_inflight_per_worker is ", limit_, ")"));
  }
  ++inside_[rank];
  return absl::OkStatus();
}

void CallLimiter::Leave(int rank) {
  absl::MutexLock lock(&mu_);
  --inside_[rank];
}

}  // namespace paramd
