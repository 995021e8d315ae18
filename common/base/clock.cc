#include "common/base/clock.h"

namespace paramd {
namespace {

class SystemClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepUntil(absl::Time t) const override {
    const absl::Duration left = t - absl::Now();
    if (left > absl::ZeroDuration()) absl::SleepFor(left);
  }
};

}  // namespace

Clock* RealClock() {
  static Clock* clock = new SystemClock;
  return clock;
}

}  // namespace paramd
