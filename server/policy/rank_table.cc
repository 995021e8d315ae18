#include "server/policy/rank_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace paramd {

RankTable::RankTable(int num_workers)
    : workers_(num_workers), last_accepted_(num_workers, -1) {}

bool RankTable::IsLastAccepted(int rank, uint64_t clock) const {
  return clock <= static_cast<uint64_t>(INT64_MAX) &&
         last_accepted_[rank] == static_cast<int64_t>(clock);
}

void RankTable::Accepted(int rank, uint64_t clock, uint64_t staleness,
                         bool dropped) {
  PolicyWorker& w = workers_[rank];
  w.clock = clock + 1;
  if (dropped) ++w.dropped;
  ++w.accepted;
  w.staleness_sum += staleness;
  w.last_staleness = staleness;
  last_accepted_[rank] = static_cast<int64_t>(clock);
}

void RankTable::Join(int rank, uint64_t clock) {
  workers_[rank].live = true;
  workers_[rank].clock = clock;
  if (last_accepted_[rank] >= 0 &&
      static_cast<uint64_t>(last_accepted_[rank]) >= clock) {
    last_accepted_[rank] = -1;
  }
}

bool RankTable::Leave(int rank) {
  if (!workers_[rank].live) return false;
  workers_[rank].live = false;
  return true;
}

uint64_t RankTable::Largest() const {
  uint64_t largest = 0;
  for (const PolicyWorker& w : workers_) largest = std::max(largest, w.clock);
  return largest;
}

uint64_t RankTable::SlowestLive(int except) const {
  uint64_t slowest = UINT64_MAX;
  for (int r = 0; r < size(); ++r) {
    if (r != except && workers_[r].live) {
      slowest = std::min(slowest, workers_[r].clock);
    }
  }
  return slowest;
}

std::string RankTable::List(const std::vector<int>& ranks) {
  if (ranks.empty()) return "-";
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
  }
  return out;
}

void RankTable::Save(PolicyState* state) const {
  state->clocks.clear();
  state->live.clear();
  for (const PolicyWorker& w : workers_) {
    state->clocks.push_back(w.clock);
    state->live.push_back(w.live);
  }
  state->last_accepted = last_accepted_;
}

absl::Status RankTable::Restore(const PolicyState& state) {
  if (state.clocks.size() != workers_.size() ||
      state.last_accepted.size() != workers_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint has ", state.clocks.size(),
                     " workers; the job has ", workers_.size()));
  }
  for (size_t r = 0; r < workers_.size(); ++r) {
    workers_[r].clock = state.clocks[r];
    last_accepted_[r] = state.last_accepted[r];
  }
  return absl::OkStatus();
}

}  // namespace paramd
