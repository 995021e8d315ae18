// ReplyFaults: replies held back and lost on purpose, as the job file's
// testing section asks (testing.delay_reply_ms, drop_reply_probability), so
// that tests and experiments see what a slow or lossy network does to
// exactly-once pushes and retries. The request has been handled when a
// reply is lost: the client sees UNAVAILABLE and must retry.
//
// Time comes from a Clock, randomness from one generator seeded from `seed`
// (0: from the system). Thread-safe.
#ifndef PARAMD_SERVER_FAULTS_REPLY_FAULTS_H_
#define PARAMD_SERVER_FAULTS_REPLY_FAULTS_H_

#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"

namespace paramd {

class ReplyFaults {
 public:
  // `clock` must outlive this object.
  explicit ReplyFaults(const TestingConfig& testing, Clock* clock = RealClock(),
                       uint64_t seed = 0);

  bool enabled() const { return max_delay_ms_ > 0 || drop_probability_ > 0; }

  // What becomes of one reply of `rpc`, handled: held back a random while
  // up to the delay, then lost with the drop probability (`lost`:
  // UNAVAILABLE naming `rpc` and the setting; OK: sent). Nothing when
  // nothing is set.
  struct Fate {
    absl::Duration delay = absl::ZeroDuration();
    absl::Status lost;
  };
  Fate Draw(const char* rpc) const;
  // Draw, with this thread waiting out the delay on the clock (a
  // synchronous handler's way); returns `lost`.
  absl::Status AfterHandled(const char* rpc) const;

 private:
  const int max_delay_ms_;
  const double drop_probability_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  mutable std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_FAULTS_REPLY_FAULTS_H_
