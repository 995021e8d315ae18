// LeaseKeeper (common/coord/lease_keeper.h) on a FakeClock with scripted
// renewals: renewed every third of the TTL, live until a renewal's sending
// plus the TTL answered, retried at once after a failure, lost for good at
// its live time or when etcd no longer has it, and live again when a
// renewal sent in time is answered late.
#include "common/coord/lease_keeper.h"

#include <catch2/catch.hpp>
#include <deque>

namespace paramd {
namespace {

constexpr int64_t kLease = 77;
const absl::Duration kTtl = absl::Seconds(9);

// Renewals that answer what the test queued, each after `took` passes on
// the clock, and count the calls.
struct Script {
  FakeClock* clock;
  std::deque<absl::StatusOr<absl::Duration>> answers;
  absl::Duration took;
  int calls = 0;
  LeaseKeeper::Renew Renew() {
    return [this](int64_t lease) -> absl::StatusOr<absl::Duration> {
      CHECK(lease == kLease);
      ++calls;
      clock->Advance(took);
      if (answers.empty()) return kTtl;
      absl::StatusOr<absl::Duration> next = answers.front();
      answers.pop_front();
      return next;
    };
  }
};

TEST_CASE("a lease renewed every third of its TTL stays live",
          "[coord][lease]") {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  Script script{&clock};
  LeaseKeeper keeper(kLease, kTtl, t0, script.Renew(), &clock);
  CHECK(keeper.Live());
  CHECK(keeper.live_until() == t0 + kTtl);
  CHECK(keeper.NextDue() == t0 + absl::Seconds(3));
  REQUIRE(keeper.Tick().ok());  // Not due yet.
  CHECK(script.calls == 0);
  for (int i = 1; i <= 10; ++i) {
    clock.Advance(absl::Seconds(3));
    REQUIRE(keeper.Tick().ok());
    CHECK(script.calls == i);
    CHECK(keeper.Live());
    CHECK(keeper.live_until() == clock.Now() + kTtl);
    CHECK(keeper.NextDue() == clock.Now() + absl::Seconds(3));
  }
  CHECK(keeper.lost().ok());
}

TEST_CASE("a renewal answered late counts from when it was sent",
          "[coord][lease]") {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  Script script{&clock};
  script.took = absl::Seconds(2);
  LeaseKeeper keeper(kLease, kTtl, t0, script.Renew(), &clock);
  clock.Advance(absl::Seconds(3));
  REQUIRE(keeper.Tick().ok());
  // Sent at t0 + 3, answered at t0 + 5: live until t0 + 3 + 9.
  CHECK(keeper.live_until() == t0 + absl::Seconds(12));
  // An answer that would shorten it (a TTL below the one held) does not.
  script.answers.push_back(absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  REQUIRE(keeper.Tick().ok());
  CHECK(keeper.live_until() == t0 + absl::Seconds(12));
}

TEST_CASE("failed renewals are tried again at once; the lease ends unrenewed",
          "[coord][lease]") {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  Script script{&clock};
  for (int i = 0; i < 3; ++i) {
    script.answers.push_back(absl::UnavailableError("etcd down"));
  }
  LeaseKeeper keeper(kLease, kTtl, t0, script.Renew(), &clock);
  clock.Advance(absl::Seconds(3));
  CHECK(keeper.Tick().code() == absl::StatusCode::kUnavailable);
  CHECK(keeper.NextDue() == clock.Now());  // Due again at once.
  CHECK(keeper.Live());
  clock.Advance(absl::Seconds(5));  // t0 + 8.
  CHECK(keeper.Tick().code() == absl::StatusCode::kUnavailable);
  CHECK(keeper.Live());
  clock.Advance(absl::Milliseconds(999));
  CHECK(keeper.Live());
  CHECK(keeper.Tick().code() == absl::StatusCode::kUnavailable);
  CHECK(script.calls == 3);
  clock.Advance(absl::Milliseconds(1));  // t0 + 9: the live time is over.
  CHECK_FALSE(keeper.Live());
  const absl::Status lost = keeper.Tick();
  CHECK(lost.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(lost.message()),
             Catch::Contains("etcd lease 77 lost: not renewed within its 9s"));
  CHECK(keeper.lost() == lost);
  // Lost for good: no renewal is sent again, even one that would answer.
  clock.Advance(absl::Seconds(3));
  CHECK(keeper.Tick() == lost);
  CHECK(script.calls == 3);
  CHECK_FALSE(keeper.Live());
}

TEST_CASE("a lease etcd no longer has is lost", "[coord][lease]") {
  FakeClock clock;
  Script script{&clock};
  script.answers.push_back(
      absl::NotFoundError("lease 77 expired or was revoked"));
  LeaseKeeper keeper(kLease, kTtl, clock.Now(), script.Renew(), &clock);
  clock.Advance(absl::Seconds(3));
  const absl::Status lost = keeper.Tick();
  CHECK(lost.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(lost.message()),
             Catch::Contains("expired or was revoked"));
  CHECK_FALSE(keeper.Live());
  CHECK_FALSE(keeper.lost().ok());
}

TEST_CASE("a renewal sent in time and answered after the live time revives",
          "[coord][lease]") {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  LeaseKeeper* keeper = nullptr;
  bool live_while_waiting = true;
  LeaseKeeper k(
      kLease, kTtl, t0,
      [&](int64_t) -> absl::StatusOr<absl::Duration> {
        clock.Advance(absl::Seconds(2));  // Sent at t0 + 8, answered at + 10.
        live_while_waiting = keeper->Live();
        return kTtl;
      },
      &clock);
  keeper = &k;
  clock.Advance(absl::Seconds(8));
  REQUIRE(k.Tick().ok());
  CHECK_FALSE(live_while_waiting);  // Past t0 + 9 with no answer yet.
  CHECK(k.Live());
  CHECK(k.live_until() == t0 + absl::Seconds(17));
  CHECK(k.lost().ok());
}

}  // namespace
}  // namespace paramd
