#include "server/policy/staleness_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

StalenessPolicy::StalenessPolicy(int num_workers, ShardStore* store,
                                 int64_t staleness, StalenessScaling scaling)
    : UpdatePolicy(num_workers, store),
      staleness_(staleness),
      scaling_(scaling) {}

uint64_t StalenessPolicy::SlowestLive() const {
  uint64_t slowest = UINT64_MAX;
  for (const PolicyWorker& w : workers_) {
    if (w.live) slowest = std::min(slowest, w.clock);
  }
  return slowest;
}

uint64_t StalenessPolicy::Needed(uint64_t clock) const {
  if (staleness_ == kUnbounded || clock <= static_cast<uint64_t>(staleness_)) {
    return 0;
  }
  return clock - static_cast<uint64_t>(staleness_);
}

absl::Status StalenessPolicy::CanJoinAt(int rank, uint64_t clock) {
  if (clock < workers_[rank].clock) {
    return absl::AbortedError(absl::StrCat(
        "Register: rank ", rank, " cannot join at clock ", clock,
        " below its own clock ", workers_[rank].clock, " (register again)"));
  }
  return absl::OkStatus();
}

uint64_t StalenessPolicy::JoinClock(int rank) const {
  // A rank never dropped (a first registration, or a restart within its
  // lease) continues from its own clock: the others waited for it.
  if (workers_[rank].live) return workers_[rank].clock;
  uint64_t others = UINT64_MAX;
  for (int r = 0; r < num_workers_; ++r) {
    if (r != rank && workers_[r].live)
      others = std::min(others, workers_[r].clock);
  }
  const uint64_t own = workers_[rank].clock;
  return others == UINT64_MAX ? own : std::max(own, others);
}

absl::Status StalenessPolicy::Accept(
    int rank, uint64_t clock, uint64_t staleness,
    absl::Span<const absl::Span<const float>> grads,
    absl::Span<const RowGrads> rows, bool skip, StepTimes* times) {
  if (clock != workers_[rank].clock) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Push: rank ", rank, " sent a gradient for clock ", clock,
        "; its next clock on this shard is ", workers_[rank].clock));
  }
  if (skip) {
    workers_[rank].clock = clock + 1;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckRowRoom(
      rows, [](uint32_t, uint64_t) { return false; },
      std::vector<uint64_t>(store_->num_tables(), 0)));
  // Zhang et al., "Staleness-aware Async-SGD" (IJCAI 2016): a gradient of
  // a version tau steps old moves the parameters 1/tau as far.
  const float scale = scaling_ == StalenessScaling::kInverse
                          ? 1.0f / static_cast<float>(staleness)
                          : 1.0f;
  store_->ApplyStep(grads, scale, rows, times);
  workers_[rank].clock = clock + 1;
  return absl::OkStatus();
}

bool StalenessPolicy::Readable(int rank, uint64_t clock) const {
  return workers_[rank].clock >= clock && SlowestLive() >= Needed(clock);
}

std::vector<int> StalenessPolicy::Awaited(int rank, uint64_t clock) const {
  if (workers_[rank].clock < clock) return {rank};
  const uint64_t needed = Needed(clock);
  return LiveRanks([this, needed](int r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return workers_[r].clock < needed;
  });
}

std::string StalenessPolicy::Describe(int rank, uint64_t clock) const {
  if (workers_[rank].clock < clock) {
    return absl::StrCat("its own push of clock ", clock - 1);
  }
  return absl::StrCat("rank(s) ", RankList(Awaited(rank, clock)),
                      " to reach clock ", Needed(clock), " (staleness bound ",
                      staleness_, ")");
}

}  // namespace paramd
