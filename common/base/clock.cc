#include "common/base/clock.h"

namespace paramd {
namespace {

class SystemClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* RealClock() {
  static Clock* clock = new SystemClock;
  return clock;
}

}  // namespace paramd
