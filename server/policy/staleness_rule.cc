#include "server/policy/staleness_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

StalenessRule::StalenessRule(ShardStore* store, int64_t staleness,
                             StalenessScaling scaling)
    : store_(store), staleness_(staleness), scaling_(scaling) {}

uint64_t StalenessRule::Needed(uint64_t clock) const {
  if (staleness_ == kUnbounded || clock <= static_cast<uint64_t>(staleness_)) {
    return 0;
  }
  return clock - static_cast<uint64_t>(staleness_);
}

absl::Status StalenessRule::Admit(const RankTable& ranks, int rank,
                                  uint64_t clock) {
  if (clock < ranks[rank].clock) {
    return absl::AbortedError(absl::StrCat(
        "Register: rank ", rank, " cannot join at clock ", clock,
        " below its own clock ", ranks[rank].clock, " (register again)"));
  }
  return absl::OkStatus();
}

uint64_t StalenessRule::JoinClock(const RankTable& ranks, int rank) const {
  // A rank never dropped (a first registration, or a restart within its
  // lease) continues from its own clock: the others waited for it.
  const uint64_t own = ranks[rank].clock;
  if (ranks[rank].live) return own;
  const uint64_t others = ranks.SlowestLive(/*except=*/rank);
  return others == UINT64_MAX ? own : std::max(own, others);
}

absl::Status StalenessRule::Accept(const RankTable& ranks, const RulePush& push,
                                   bool* dropped) {
  *dropped = false;
  if (push.clock != ranks[push.rank].clock) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Push: rank ", push.rank, " sent a gradient for clock ", push.clock,
        "; its next clock on this shard is ", ranks[push.rank].clock));
  }
  if (push.skip) return absl::OkStatus();
  if (!push.rows.empty()) RETURN_IF_ERROR(store_->CheckRowRoom(push.rows));
  // Zhang et al., "Staleness-aware Async-SGD" (IJCAI 2016): a gradient of
  // a version tau steps old moves the parameters 1/tau as far.
  const float scale = scaling_ == StalenessScaling::kInverse
                          ? 1.0f / static_cast<float>(push.staleness)
                          : 1.0f;
  store_->ApplyStep(push.grads, scale, push.rows, push.times);
  return absl::OkStatus();
}

bool StalenessRule::Readable(const RankTable& ranks, int rank, uint64_t clock,
                             absl::Span<const int> /*locals*/) const {
  return ranks[rank].clock >= clock && ranks.SlowestLive() >= Needed(clock);
}

std::vector<int> StalenessRule::Awaited(const RankTable& ranks, int rank,
                                        uint64_t clock) const {
  if (ranks[rank].clock < clock) return {rank};
  const uint64_t needed = Needed(clock);
  return ranks.Live(
      [&ranks, needed](int r) { return ranks[r].clock < needed; });
}

std::string StalenessRule::Describe(const RankTable& ranks, int rank,
                                    uint64_t clock) const {
  if (ranks[rank].clock < clock) {
    return absl::StrCat("its own push of clock ", clock - 1);
  }
  return absl::StrCat("rank(s) ", RankTable::List(Awaited(ranks, rank, clock)),
                      " to reach clock ", Needed(clock), " (staleness bound ",
                      staleness_, ")");
}

}  // namespace paramd
