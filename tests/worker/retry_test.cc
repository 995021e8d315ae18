// Retry: which failures are retried, the back-off between tries and giving
// up, on a clock that moves only when the retry sleeps.
#include "worker/retry.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/stepping_clock.h"

namespace paramd {
namespace {

using testing::SteppingClock;

RetryOptions Options(SteppingClock* clock, absl::Duration give_up) {
  RetryOptions o;
  o.give_up = give_up;
  o.clock = clock;
  o.seed = 11;
  o.who = "rank 0";
  return o;
}

TEST_CASE("a call that passes at once is not retried", "[retry]") {
  SteppingClock clock;
  int tries = 0;
  absl::StatusOr<uint64_t> r =
      Retry("Pull", Options(&clock, absl::Seconds(10)), [&] {
        ++tries;
        return absl::StatusOr<uint64_t>(7);
      });
  REQUIRE(r.ok());
  CHECK(*r == 7);
  CHECK(tries == 1);
  CHECK(clock.sleeps.empty());
}

TEST_CASE("UNAVAILABLE and DEADLINE_EXCEEDED are retried until it passes",
          "[retry]") {
  SteppingClock clock;
  int tries = 0;
  absl::StatusOr<uint64_t> r =
      Retry("Push", Options(&clock, absl::Seconds(10)),
            [&]() -> absl::StatusOr<uint64_t> {
              ++tries;
              if (tries == 1) return absl::UnavailableError("down");
              if (tries == 2) return absl::DeadlineExceededError("slow");
              return 3;
            });
  REQUIRE(r.ok());
  CHECK(tries == 3);
  REQUIRE(clock.sleeps.size() == 2);
  // Full jitter: the first in [25, 50] ms, the second in [50, 100] ms.
  CHECK(clock.sleeps[0] >= absl::Milliseconds(25));
  CHECK(clock.sleeps[0] <= absl::Milliseconds(50));
  CHECK(clock.sleeps[1] >= absl::Milliseconds(50));
  CHECK(clock.sleeps[1] <= absl::Milliseconds(100));
}

TEST_CASE("other failures end the call at once", "[retry]") {
  SteppingClock clock;
  for (absl::Status refused :
       {absl::AbortedError("dropped"), absl::InvalidArgumentError("bad"),
        absl::FailedPreconditionError("state")}) {
    int tries = 0;
    absl::StatusOr<uint64_t> r =
        Retry("Push", Options(&clock, absl::Seconds(10)),
              [&]() -> absl::StatusOr<uint64_t> {
                ++tries;
                return refused;
              });
    CHECK(r.status() == refused);
    CHECK(tries == 1);
  }
  CHECK(clock.sleeps.empty());
}

TEST_CASE("the back-off doubles up to 2 s and the call gives up in time",
          "[retry]") {
  SteppingClock clock;
  int tries = 0;
  absl::StatusOr<uint64_t> r =
      Retry("Pull", Options(&clock, absl::Seconds(30)),
            [&]() -> absl::StatusOr<uint64_t> {
              ++tries;
              return absl::UnavailableError("no server");
            });
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsUnavailable(r.status()));
  CHECK(absl::StrContains(r.status().message(), "liveness.give_up_seconds"));
  CHECK(absl::StrContains(r.status().message(), "no server"));
  CHECK(absl::StrContains(r.status().message(),
                          absl::StrCat("gave up after ", tries, " tries")));
  absl::Duration slept = absl::ZeroDuration();
  absl::Duration bound = kFirstBackoff;
  for (absl::Duration d : clock.sleeps) {
    CHECK(d >= bound / 2);
    CHECK(d <= bound);
    slept += d;
    bound = std::min(bound * 2, kMaxBackoff);
  }
  // Gave up at the first try past 30 s, not before and not much later.
  CHECK(slept >= absl::Seconds(30));
  CHECK(slept < absl::Seconds(30) + kMaxBackoff);
  CHECK(tries == static_cast<int>(clock.sleeps.size()) + 1);
}

TEST_CASE(
    "a try that found no server goes again at once when a shard moved to "
    "its other replica, and backs off when none did",
    "[retry][replication]") {
  SteppingClock clock;
  RetryOptions options = Options(&clock, absl::Seconds(10));
  int fail_overs = 0;
  bool moved = true;
  options.fail_over = [&] {
    ++fail_overs;
    return moved;
  };
  std::vector<absl::Status> outcomes = {absl::UnavailableError("primary down"),
                                        absl::OkStatus()};
  int tries = 0;
  auto attempt = [&]() -> absl::StatusOr<uint64_t> {
    const absl::Status s = outcomes[tries++];
    if (!s.ok()) return s;
    return 5;
  };
  absl::StatusOr<uint64_t> r = Retry("PushPull", options, attempt);
  REQUIRE(r.ok());
  CHECK(tries == 2);
  CHECK(fail_overs == 1);
  CHECK(clock.sleeps.empty());  // The backup was tried at once.

  // Nothing moved: the second try comes after a back-off. A refusal (not
  // UNAVAILABLE) asks for no fail-over.
  moved = false;
  tries = 0;
  fail_overs = 0;
  r = Retry("PushPull", options, attempt);
  REQUIRE(r.ok());
  CHECK(tries == 2);
  CHECK(fail_overs == 1);
  CHECK(clock.sleeps.size() == 1);
  outcomes = {absl::InvalidArgumentError("bad push")};
  tries = 0;
  fail_overs = 0;
  r = Retry("PushPull", options, attempt);
  CHECK(absl::IsInvalidArgument(r.status()));
  CHECK(fail_overs == 0);
}

}  // namespace
}  // namespace paramd
