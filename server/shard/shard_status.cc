// Shard::GetStatus: the shard's live view for the status RPC.
#include <algorithm>

#include "server/shard/proto_convert.h"
#include "server/shard/shard.h"

namespace paramd {

void Shard::GetStatus(proto::ShardStatus* status) const {
  const absl::Time now = clock_->Now();
  status->set_job_id(config_.job_id);
  status->set_shard(shard_id_);
  status->set_num_shards(config_.num_shards());
  status->set_policy(policy_->name());
  rows_.FillStatus(status);
  status->set_staleness_bound(
      config_.policy.type == PolicyType::kSsp ? config_.policy.staleness : -1);
  status->set_lease_seconds(config_.liveness.lease_seconds);
  status->set_chunks(store_.num_chunks());
  status->set_bytes(store_.bytes());
  status->set_version(store_.version());
  status->set_uptime_seconds(absl::ToDoubleSeconds(now - started_));
  status->set_total_epochs(config_.training.epochs);
  status->set_pushes_per_second(stats_.PushesPerSecond(now));
  status->set_pull_wait_p50_ms(stats_.PullWaitMs(50));
  status->set_pull_wait_p99_ms(stats_.PullWaitMs(99));
  if (checkpoints_ != nullptr) checkpoints_->FillStatus(now, status);
  status->set_bytes_in_float32(stats_.push_float32_bytes());
  FillWorkers(now, status);
  FillWaiting(now, status);
}

void Shard::FillWorkers(absl::Time now, proto::ShardStatus* status) const {
  const std::vector<WorkerInfo> workers = workers_.Snapshot();
  const std::vector<PolicyWorker> clocks = policy_->Workers();
  uint64_t fastest = 0;
  for (const PolicyWorker& w : clocks) fastest = std::max(fastest, w.clock);
  uint64_t pushes = 0, pulls = 0, bytes_in = 0, bytes_out = 0;
  // Ranks whose epoch reports an epoch waits for: live or finished.
  std::vector<bool> counted(workers.size());
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const WorkerInfo& w = workers[rank];
    FillWorkerStatus(static_cast<int>(rank), w, clocks[rank], fastest, now,
                     status->add_workers());
    counted[rank] = clocks[rank].live || w.finished;
    pushes += w.pushes;
    pulls += w.pulls;
    bytes_in += w.bytes_in;
    bytes_out += w.bytes_out;
  }
  status->set_pushes(pushes);
  status->set_pulls(pulls);
  status->set_bytes_in(bytes_in);
  status->set_bytes_out(bytes_out);
  for (const EpochSummary& e : metrics_.Summaries(counted)) {
    FillEpochMetrics(e, status->add_epochs());
  }
}

void Shard::FillWaiting(absl::Time now, proto::ShardStatus* status) const {
  for (const PullWaiters::Waiter& w : waiters_.List()) {
    proto::WaitingPull* p = status->add_waiting();
    p->set_rank(w.rank);
    p->set_clock(w.clock);
    p->set_waited_seconds(std::max(0.0, absl::ToDoubleSeconds(now - w.since)));
    // Asked after the waiters' lock is released: the policy has its own.
    p->set_waiting_on(policy_->WaitingOn(w.rank, w.clock));
  }
}

}  // namespace paramd
