// ReplyFaults: testing.delay_reply_ms and drop_reply_probability, on a fake
// clock; and the Clock seam's SleepUntil it waits with.
#include "server/faults/reply_faults.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"

namespace paramd {
namespace {

TestingConfig Faults(int delay_ms, double drop) {
  TestingConfig t;
  t.delay_reply_ms = delay_ms;
  t.drop_reply_probability = drop;
  return t;
}

TEST_CASE("nothing set: every reply goes out at once", "[faults]") {
  FakeClock clock;
  ReplyFaults faults(Faults(0, 0), &clock, 1);
  CHECK_FALSE(faults.enabled());
  for (int i = 0; i < 100; ++i) CHECK(faults.AfterHandled("Push").ok());
}

TEST_CASE("a drop probability of 1 loses every reply, naming the call",
          "[faults]") {
  FakeClock clock;
  ReplyFaults faults(Faults(0, 1), &clock, 7);
  REQUIRE(faults.enabled());
  const absl::Status lost = faults.AfterHandled("PushPull");
  CHECK(lost.code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(lost.message(), "PushPull"));
  CHECK(absl::StrContains(lost.message(), "testing.drop_reply_probability"));
  CHECK(absl::StrContains(lost.message(), "the request was handled"));
}

TEST_CASE("a drop probability between 0 and 1 loses about that share",
          "[faults]") {
  FakeClock clock;
  ReplyFaults faults(Faults(0, 0.25), &clock, 42);
  int lost = 0;
  constexpr int kCalls = 4000;
  for (int i = 0; i < kCalls; ++i) lost += !faults.AfterHandled("Pull").ok();
  // Binomial(4000, 0.25): mean 1000, standard deviation ~27.
  CHECK(lost > 850);
  CHECK(lost < 1150);
}

// A clock that stands still and records how long each sleep asks for.
class RecordingClock : public Clock {
 public:
  absl::Time Now() const override { return absl::FromUnixSeconds(1000); }
  void SleepUntil(absl::Time t) const override { sleeps.push_back(t - Now()); }
  mutable std::vector<absl::Duration> sleeps;
};

TEST_CASE("a delayed reply waits on the clock, up to the setting", "[faults]") {
  RecordingClock clock;
  ReplyFaults faults(Faults(50, 0), &clock, 3);
  for (int i = 0; i < 200; ++i) CHECK(faults.AfterHandled("Push").ok());
  REQUIRE(!clock.sleeps.empty());
  absl::Duration longest = absl::ZeroDuration();
  for (absl::Duration d : clock.sleeps) {
    CHECK(d > absl::ZeroDuration());
    CHECK(d <= absl::Milliseconds(50));
    longest = std::max(longest, d);
  }
  // Uniform over 0-50 ms: 200 draws reach past 40 ms.
  CHECK(longest > absl::Milliseconds(40));
}

TEST_CASE("FakeClock::SleepUntil returns once Advance reaches the time",
          "[faults][clock]") {
  FakeClock clock(absl::FromUnixSeconds(100));
  clock.SleepUntil(absl::FromUnixSeconds(99));  // Past: at once.
  absl::Notification woke;
  std::thread sleeper([&] {
    clock.SleepUntil(absl::FromUnixSeconds(110));
    woke.Notify();
  });
  clock.Advance(absl::Seconds(5));
  CHECK_FALSE(woke.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  clock.Advance(absl::Seconds(5));
  CHECK(woke.WaitForNotificationWithTimeout(absl::Seconds(30)));
  sleeper.join();
}

}  // namespace
}  // namespace paramd
