// RegisterInTwoPhases (worker/parameter_client.h) against a fake shard
// whose round moves on as the worker registers: a join at the proposal
// when the round stands still, a join a little ahead when every exact one
// is overtaken, and errors other than ABORTED returned at once.
#include <catch2/catch.hpp>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/parameter_client.h"

namespace paramd {
namespace {

// One shard as the two phases see it: it proposes its round, joins at a
// clock from its round up to 2 beyond (as UpdatePolicy::Join does), and
// its round moves on by `advance` with every call (the rounds other
// workers finish during one round trip).
struct FakeShard {
  uint64_t round = 10;
  uint64_t advance = 0;
  int calls = 0;
  uint64_t joined_at = 0;

  absl::StatusOr<uint64_t> Phase(bool join, uint64_t clock) {
    ++calls;
    const uint64_t now = round;
    round += advance;
    if (!join) return now;
    if (clock < round) {
      return absl::AbortedError(absl::StrCat("moved on to ", round));
    }
    if (clock > now + 2) return absl::InvalidArgumentError("too far ahead");
    joined_at = clock;
    return clock;
  }
};

TEST_CASE("register: a shard that stands still is joined at its proposal",
          "[worker][register]") {
  FakeShard shard;
  absl::StatusOr<uint64_t> clock = RegisterInTwoPhases(
      [&](bool join, uint64_t c) { return shard.Phase(join, c); });
  REQUIRE(clock.ok());
  CHECK(*clock == 10);
  CHECK(shard.calls == 2);
}

TEST_CASE(
    "register: rounds that outpace every exact join are joined a little "
    "ahead, which the shard accepts",
    "[worker][register]") {
  FakeShard shard;
  shard.advance = 1;  // Every round trip, a round passes.
  absl::StatusOr<uint64_t> clock = RegisterInTwoPhases(
      [&](bool join, uint64_t c) { return shard.Phase(join, c); });
  INFO(clock.status());
  REQUIRE(clock.ok());
  CHECK(*clock == shard.joined_at);
  CHECK(*clock >= shard.round);
  // Three exact tries were overtaken first.
  CHECK(shard.calls == 8);
}

TEST_CASE("register: an error other than ABORTED ends it at once",
          "[worker][register]") {
  int calls = 0;
  absl::StatusOr<uint64_t> clock =
      RegisterInTwoPhases([&](bool join, uint64_t) -> absl::StatusOr<uint64_t> {
        ++calls;
        if (!join) return 0;
        return absl::FailedPreconditionError("another launch");
      });
  CHECK(absl::IsFailedPrecondition(clock.status()));
  CHECK(calls == 2);
}

}  // namespace
}  // namespace paramd
