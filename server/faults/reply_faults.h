// ReplyFaults: replies held back and lost on purpose, as the job file's
// testing section asks (testing.delay_reply_ms, drop_reply_probability), so
// that tests and experiments see what a slow or lossy network does to
// exactly-once pushes and retries. The request has been handled when a
// reply is lost: the client sees UNAVAILABLE and must retry.
//
// The serving path holds a reply back itself (the call's alarm: no thread
// waits) — the stream reactors and every unary method with faults
// (server/rpc/served_methods.h). Randomness comes from one generator
// seeded from `seed` (0: from the system). Thread-safe.
#ifndef PARAMD_SERVER_FAULTS_REPLY_FAULTS_H_
#define PARAMD_SERVER_FAULTS_REPLY_FAULTS_H_

#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"

namespace paramd {

class ReplyFaults {
 public:
  explicit ReplyFaults(const TestingConfig& testing, uint64_t seed = 0);

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

 private:
  const int max_delay_ms_;
  const double drop_probability_;
  mutable absl::Mutex mu_;
  mutable std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_FAULTS_REPLY_FAULTS_H_
