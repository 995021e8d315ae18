// StalenessRule: stale synchronous parallel (SSP) with bound s, and
// asynchronous parallel (ASP) as s = unbounded.
//
// Every push is applied as it arrives, as its own optimizer step (divided by
// the push's staleness tau under StalenessScaling::kInverse). A worker
// at clock c may read once its own pushes up to clock c-1 are applied (it
// reads its writes) and the slowest live worker's clock is at least c - s.
// s = 0 waits like sync (no worker runs ahead of the slowest); unbounded
// never waits on another worker. A rank's pushes must come in clock order.
// A rank still live (first registration, quick restart) continues from its
// own clock; a rank that was dropped rejoins at the larger of its own clock
// and the slowest other live worker's, so it does not hold the others back
// for clocks it missed.
#ifndef PARAMD_SERVER_POLICY_STALENESS_RULE_H_
#define PARAMD_SERVER_POLICY_STALENESS_RULE_H_

#include <limits>

#include "server/policy/policy_rule.h"

namespace paramd {

class StalenessRule : public PolicyRule {
 public:
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

  // `store` must outlive the rule. `scaling` weighs each push's step by
  // its staleness tau.
  StalenessRule(ShardStore* store, int64_t staleness,
                StalenessScaling scaling = StalenessScaling::kNone);

  const char* name() const override {
    return staleness_ == kUnbounded ? "async" : "ssp";
  }

  uint64_t JoinClock(const RankTable& ranks, int rank) const override;
  absl::Status Admit(const RankTable& ranks, int rank, uint64_t clock) override;
  absl::Status Accept(const RankTable& ranks, const RulePush& push,
                      bool* dropped) override;
  bool Readable(const RankTable& ranks, int rank, uint64_t clock,
                absl::Span<const int> locals) const override;
  std::vector<int> Awaited(const RankTable& ranks, int rank,
                           uint64_t clock) const override;
  std::string Describe(const RankTable& ranks, int rank,
                       uint64_t clock) const override;

 private:
  // The slowest clock a reader at `clock` needs: clock - s, at least 0.
  uint64_t Needed(uint64_t clock) const;

  ShardStore* const store_;
  const int64_t staleness_;
  const StalenessScaling scaling_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_STALENESS_RULE_H_
