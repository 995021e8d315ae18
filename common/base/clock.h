// Clock: the seam through which paramd reads the time and waits for it
// (leases, wait diagnostics, rates, the link shaper, reply delays), so
// tests drive time with a FakeClock instead of sleeping.
#ifndef PARAMD_COMMON_BASE_CLOCK_H_
#define PARAMD_COMMON_BASE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace paramd {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Returns once Now() has reached `t` (at once when it has). The system
  // clock sleeps; a FakeClock waits for Advance.
  virtual void SleepUntil(absl::Time t) const = 0;
};

// The system's clock. Thread-safe; never destroyed.
Clock* RealClock();

// A clock that moves only when told. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void SleepUntil(absl::Time t) const override {
    absl::MutexLock lock(&mu_);
    auto reached = [this, t]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return now_ >= t; };
    mu_.Await(absl::Condition(&reached));
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_CLOCK_H_
