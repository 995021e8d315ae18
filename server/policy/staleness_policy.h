// StalenessPolicy: stale synchronous parallel (SSP) with bound s, and
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
#ifndef PARAMD_SERVER_POLICY_STALENESS_POLICY_H_
#define PARAMD_SERVER_POLICY_STALENESS_POLICY_H_

#include <limits>

#include "server/policy/update_policy.h"

namespace paramd {

class StalenessPolicy : public UpdatePolicy {
 public:
  static constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

  // `store` must outlive the policy.
  // `scaling` weighs each push's step by its staleness tau.
  StalenessPolicy(int num_workers, ShardStore* store, int64_t staleness,
                  StalenessScaling scaling = StalenessScaling::kNone);

  const char* name() const override {
    return staleness_ == kUnbounded ? "async" : "ssp";
  }

 protected:
  uint64_t JoinClock(int rank) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CanJoinAt(int rank, uint64_t clock) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Accept(int rank, uint64_t clock, uint64_t staleness,
                      absl::Span<const absl::Span<const float>> grads,
                      absl::Span<const RowGrads> rows, bool skip,
                      StepTimes* times) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Readable(int rank, uint64_t clock) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<int> Awaited(int rank, uint64_t clock) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(int rank, uint64_t clock) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  // The clock every live worker has reached (max when none is live).
  uint64_t SlowestLive() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slowest clock a reader at `clock` needs: clock - s, at least 0.
  uint64_t Needed(uint64_t clock) const;

  const int64_t staleness_;
  const StalenessScaling scaling_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_STALENESS_POLICY_H_
