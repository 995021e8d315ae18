// LinkShaper: a shard's network link as slow as `testing.link_mbps` says,
// for benchmarks of what compression and overlap buy where the network,
// not the cores, is the bound.
//
// Each direction (into the shard: pushes; out of it: pulls) carries one
// transfer at a time at the given rate: a transfer starts when the earlier
// ones in its direction have ended and lasts bytes / rate. The handler of
// a push waits until its bytes would have arrived before applying it; the
// handler of a pull waits until its reply would have left. Real transfer
// time on loopback comes on top (it is small beside a shaped link's).
//
// Time comes from a Clock (common/base/clock.h). Thread-safe.
#ifndef PARAMD_SERVER_FAULTS_LINK_SHAPER_H_
#define PARAMD_SERVER_FAULTS_LINK_SHAPER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"

namespace paramd {

class LinkShaper {
 public:
  enum Direction { kIn = 0, kOut = 1 };

  // `mbps` megabits per second each way; 0: no shaping. `clock` must
  // outlive the shaper.
  explicit LinkShaper(double mbps, Clock* clock = RealClock());

  bool enabled() const { return bytes_per_second_ > 0; }

  // Books a transfer of `bytes` in direction `d` that may start at `now`;
  // returns when it ends.
  absl::Time Reserve(Direction d, uint64_t bytes, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The same, starting at the clock's now.
  absl::Time Reserve(Direction d, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // Reserve, then sleep until the transfer ends (nothing when off).
  void Transfer(Direction d, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // Sleeps until `t` (nothing when off). A stream's messages are reserved
  // as they come and slept for once, to the last one's end, or each to its
  // own end from reservations made together: a sleep's overshoot then
  // delays no later message, as it would if each message slept in turn.
  void SleepUntil(absl::Time t) const;

 private:
  const double bytes_per_second_;
  Clock* const clock_;
  absl::Mutex mu_;
  absl::Time busy_until_[2] ABSL_GUARDED_BY(mu_) = {absl::InfinitePast(),
                                                    absl::InfinitePast()};
};

}  // namespace paramd

#endif  // PARAMD_SERVER_FAULTS_LINK_SHAPER_H_
