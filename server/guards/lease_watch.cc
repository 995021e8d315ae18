#include "server/guards/lease_watch.h"

#include <algorithm>
#include <vector>

#include "spdlog/spdlog.h"

namespace paramd {

void LeaseWatch::Check(absl::Time now) {
  const absl::Time job_start = workers_->job_start();
  if (now < job_start) return;
  const absl::Duration lease = absl::Seconds(lease_seconds_);
  const std::vector<WorkerInfo> info = workers_->Snapshot();
  const std::vector<PolicyWorker> live = policy_->Workers();
  for (int r = 0; r < static_cast<int>(info.size()); ++r) {
    // A rank never heard from counts from the job's start.
    const absl::Time seen = std::max(info[r].last_seen, job_start);
    if (live[r].live && now - seen > lease) {
      policy_->Leave(r);
      spdlog::warn(
          "shard {}: rank {} silent for {:.1f}s (lease {}s): dropped from "
          "the live set at clock {}",
          shard_, r, absl::ToDoubleSeconds(now - seen), lease_seconds_,
          live[r].clock);
    }
  }
}

}  // namespace paramd
