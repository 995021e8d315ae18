#include "server/stats/stall_inspector.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace paramd {
namespace {

std::string Ago(absl::Time then, absl::Time now) {
  if (then == absl::InfinitePast()) return "never";
  return absl::StrFormat("%.1fs ago",
                         std::max(0.0, absl::ToDoubleSeconds(now - then)));
}

}  // namespace

StallInspector::StallInspector(int shard, absl::Duration stall_warn,
                               PullWaiters* waiters, UpdatePolicy* policy,
                               const WorkerRegistry* workers)
    : shard_(shard),
      stall_warn_(stall_warn),
      waiters_(waiters),
      policy_(policy),
      workers_(workers) {}

std::string StallInspector::LastDone(const std::vector<int>& ranks,
                                     absl::Time now) const {
  const std::vector<WorkerInfo> info = workers_->Snapshot();
  const std::vector<PolicyWorker> clocks = policy_->Workers();
  std::string out;
  for (int r : ranks) {
    const WorkerInfo& w = info[r];
    const uint64_t next = clocks[r].clock;
    absl::StrAppend(&out, out.empty() ? "" : "; ", "rank ", r, ": ",
                    clocks[r].live ? "live" : "dropped", ", ",
                    next == 0 ? std::string("no push yet")
                              : absl::StrCat("last pushed clock ", next - 1,
                                             " ", Ago(w.last_push, now)),
                    ", last heartbeat ", Ago(w.last_heartbeat, now));
  }
  return out;
}

std::vector<std::string> StallInspector::Check(absl::Time now) {
  std::vector<std::string> lines;
  for (const PullWaiters::Waiter& w : waiters_->TakeDue(now, stall_warn_)) {
    const std::vector<int> ranks = policy_->AwaitedRanks(w.rank, w.clock);
    if (ranks.empty()) continue;  // It may go on; its thread wakes it.
    const std::string why = policy_->WaitingOn(w.rank, w.clock);
    const absl::Duration next = stall_warn_ * (1 << std::min(w.warnings, 20));
    lines.push_back(absl::StrFormat(
        "shard %d: stall: a pull of rank %d at clock %d has waited %.1fs for "
        "%s; %s (warning %d, next after %.0fs of waiting)",
        shard_, w.rank, w.clock, absl::ToDoubleSeconds(now - w.since),
        why.empty() ? "-" : why, LastDone(ranks, now), w.warnings,
        absl::ToDoubleSeconds(next)));
    spdlog::warn("{}", lines.back());
    warnings_.fetch_add(1, std::memory_order_relaxed);
  }
  return lines;
}

void StallInspector::FillStatus(absl::Time now,
                                proto::ShardStatus* status) const {
  status->set_stall_warn_seconds(absl::ToDoubleSeconds(stall_warn_));
  status->set_stall_warnings(warnings_.load(std::memory_order_relaxed));
  std::vector<bool> stalling(status->workers_size(), false);
  for (const PullWaiters::Waiter& w : waiters_->List()) {
    proto::WaitingPull* p = status->add_waiting();
    const absl::Duration waited = std::max(absl::ZeroDuration(), now - w.since);
    p->set_rank(w.rank);
    p->set_clock(w.clock);
    p->set_waited_seconds(absl::ToDoubleSeconds(waited));
    // Asked after the waiters' lock is released: the policy has its own.
    p->set_waiting_on(policy_->WaitingOn(w.rank, w.clock));
    const std::vector<int> ranks = policy_->AwaitedRanks(w.rank, w.clock);
    for (int r : ranks) p->add_waits_for(r);
    p->set_stalled(!ranks.empty() && waited > stall_warn_);
    if (!p->stalled()) continue;
    for (int r : ranks) {
      if (r < static_cast<int>(stalling.size())) stalling[r] = true;
    }
  }
  for (int r = 0; r < status->workers_size(); ++r) {
    status->mutable_workers(r)->set_stalling(stalling[r]);
  }
}

}  // namespace paramd
