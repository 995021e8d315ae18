// SteppingClock: a Clock for tests on which time passes only when the code
// under test sleeps (each sleep recorded) or the test moves it, so waits,
// back-offs and deadlines are checked to the nanosecond without sleeping.
// Thread-compatible.
#ifndef PARAMD_TESTS_STEPPING_CLOCK_H_
#define PARAMD_TESTS_STEPPING_CLOCK_H_

#include <algorithm>
#include <vector>

#include "absl/time/time.h"
#include "common/base/clock.h"

namespace paramd::testing {

class SteppingClock : public Clock {
 public:
  absl::Time Now() const override { return now_; }
  void SleepUntil(absl::Time t) const override {
    sleeps.push_back(t - now_);
    now_ = std::max(now_, t);
  }
  // Moves the time to `t` (never back), recording no sleep.
  void MoveTo(absl::Time t) { now_ = std::max(now_, t); }

  // Each sleep's length, in order.
  mutable std::vector<absl::Duration> sleeps;

 private:
  mutable absl::Time now_ = absl::FromUnixSeconds(1000);
};

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_STEPPING_CLOCK_H_
