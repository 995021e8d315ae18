// ReplyFaults: testing.delay_reply_ms and drop_reply_probability, each
// reply's fate drawn (the serving path holds it on the call's alarm:
// wire_contract_test, stream_reactors_test); and the Clock seam's
// SleepUntil.
#include "server/faults/reply_faults.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "common/base/clock.h"

namespace paramd {
namespace {

TestingConfig Faults(int delay_ms, double drop) {
  TestingConfig t;
  t.delay_reply_ms = delay_ms;
  t.drop_reply_probability = drop;
  return t;
}

TEST_CASE("nothing set: every reply goes out at once", "[faults]") {
  ReplyFaults faults(Faults(0, 0), 1);
  CHECK_FALSE(faults.enabled());
  for (int i = 0; i < 100; ++i) {
    const ReplyFaults::Fate fate = faults.Draw("Push");
    CHECK(fate.delay == absl::ZeroDuration());
    CHECK(fate.lost.ok());
  }
}

TEST_CASE("a drop probability of 1 loses every reply, naming the call",
          "[faults]") {
  ReplyFaults faults(Faults(0, 1), 7);
  REQUIRE(faults.enabled());
  const absl::Status lost = faults.Draw("PushPull").lost;
  CHECK(lost.code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(lost.message(), "PushPull"));
  CHECK(absl::StrContains(lost.message(), "testing.drop_reply_probability"));
  CHECK(absl::StrContains(lost.message(), "the request was handled"));
}

TEST_CASE("a drop probability between 0 and 1 loses about that share",
          "[faults]") {
  ReplyFaults faults(Faults(0, 0.25), 42);
  int lost = 0;
  constexpr int kCalls = 4000;
  for (int i = 0; i < kCalls; ++i) lost += !faults.Draw("Pull").lost.ok();
  // Binomial(4000, 0.25): mean 1000, standard deviation ~27.
  CHECK(lost > 850);
  CHECK(lost < 1150);
}

TEST_CASE("a reply is held back a random while, up to the setting",
          "[faults]") {
  ReplyFaults faults(Faults(50, 0), 3);
  absl::Duration longest = absl::ZeroDuration();
  for (int i = 0; i < 200; ++i) {
    const ReplyFaults::Fate fate = faults.Draw("Push");
    CHECK(fate.lost.ok());
    CHECK(fate.delay >= absl::ZeroDuration());
    CHECK(fate.delay <= absl::Milliseconds(50));
    longest = std::max(longest, fate.delay);
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
