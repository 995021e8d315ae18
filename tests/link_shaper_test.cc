// The simulated link of testing.link_mbps: transfers in one direction
// queue behind each other at the given rate; the two directions do not.
#include "server/faults/link_shaper.h"

#include <catch2/catch.hpp>

namespace paramd {
namespace {

TEST_CASE("transfers queue per direction at the link's rate", "[shaper]") {
  LinkShaper link(8);  // 8 Mb/s: 1 MB per second.
  REQUIRE(link.enabled());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // 0.5 MB from t0 ends at t0 + 0.5 s.
  CHECK(link.Reserve(LinkShaper::kIn, 500000, t0) ==
        t0 + absl::Milliseconds(500));
  // The next one waits for it: starts at t0 + 0.5 s, lasts 0.25 s.
  CHECK(link.Reserve(LinkShaper::kIn, 250000, t0 + absl::Milliseconds(100)) ==
        t0 + absl::Milliseconds(750));
  // The other direction is free.
  CHECK(link.Reserve(LinkShaper::kOut, 1000000, t0) == t0 + absl::Seconds(1));
  // A transfer after the link went idle starts when it is offered.
  const absl::Time later = t0 + absl::Seconds(10);
  CHECK(link.Reserve(LinkShaper::kIn, 1000, later) ==
        later + absl::Milliseconds(1));
}

TEST_CASE("a link of 0 Mb/s does not shape", "[shaper]") {
  LinkShaper off(0);
  CHECK_FALSE(off.enabled());
  const absl::Time t0 = absl::FromUnixSeconds(5);
  CHECK(off.Reserve(LinkShaper::kIn, 1 << 30, t0) == t0);
  off.Transfer(LinkShaper::kOut, 1 << 30);  // Returns at once.
  off.SleepUntil(absl::InfiniteFuture());   // So does this.
}

TEST_CASE(
    "a stream's messages booked together follow each other on the link, "
    "and a time already past is not slept for",
    "[shaper]") {
  LinkShaper link(8);
  const absl::Time t0 = absl::FromUnixSeconds(2000);
  // Three parts booked at once are back to back, whatever a sleep for the
  // first overshoots.
  CHECK(link.Reserve(LinkShaper::kOut, 1000, t0) == t0 + absl::Milliseconds(1));
  CHECK(link.Reserve(LinkShaper::kOut, 1000, t0) == t0 + absl::Milliseconds(2));
  CHECK(link.Reserve(LinkShaper::kOut, 1000, t0) == t0 + absl::Milliseconds(3));
  link.SleepUntil(t0);  // Long past: returns at once.
}

}  // namespace
}  // namespace paramd
