// Retry: how the worker's client retries a call whose failure may pass —
// UNAVAILABLE (no server reachable, or a reply lost on the way) and
// DEADLINE_EXCEEDED. Retrying is safe: pulls are idempotent and a shard
// acknowledges a push it applied already (PushResponse.duplicate). Between
// tries it sleeps with full jitter in [b/2, b], b doubling from 50 ms up
// to 2 s, and it gives up once `give_up` has passed since the first
// failure, saying so (liveness.give_up_seconds). Time comes from a Clock,
// so tests run it on a fake one. Thread-compatible: one call at a time per
// RetryOptions' generator.
#ifndef PARAMD_WORKER_RETRY_H_
#define PARAMD_WORKER_RETRY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"

namespace paramd {

struct RetryOptions {
  absl::Duration give_up = absl::Seconds(120);
  Clock* clock = RealClock();
  // Seeds the jitter (0: from the system, on the first failure only:
  // std::random_device costs a system call, and most calls succeed at once).
  uint64_t seed = 0;
  // Who retries, for the log: e.g. "rank 3".
  std::string who;
  // After a try that found no server, when set: moves the shards whose
  // server did not answer to their other replica (replication.factor 2)
  // and says whether any moved; when one did, the call goes again at once,
  // without backing off (each retry then tries both replicas: a backup
  // refuses until it took over, a restarted primary serves again).
  std::function<bool()> fail_over;
};

// Runs `attempt` until it succeeds or fails otherwise than UNAVAILABLE or
// DEADLINE_EXCEEDED, or options.give_up has passed since its first failure
// (the error then says after how many tries and how long). `what` names the
// call in the log.
absl::StatusOr<uint64_t> Retry(
    const char* what, const RetryOptions& options,
    const std::function<absl::StatusOr<uint64_t>()>& attempt);

// A call this worker did not cancel that ended CANCELLED was ended by its
// server (one stopping): UNAVAILABLE, so that it is retried; any other
// status as it is.
absl::Status CancelledByServer(const absl::Status& s);

// `s` with "<what><shard>: " before its message, e.g. "Push to shard 1: ".
absl::Status PrefixStatus(const absl::Status& s, const char* what, int shard);

// The first backoff and its cap.
inline constexpr absl::Duration kFirstBackoff = absl::Milliseconds(50);
inline constexpr absl::Duration kMaxBackoff = absl::Seconds(2);

}  // namespace paramd

#endif  // PARAMD_WORKER_RETRY_H_
