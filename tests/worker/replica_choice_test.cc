// ReplicaChoice (worker/replica_choice.h) on a FakeClock: which calls'
// ends move a shard to its other replica, when a shard's current replica
// is taken for hung (to the nanosecond of hung_after), what counts as
// hearing from it, and the wait before a shard goes back to a replica
// taken for hung.
#include "worker/replica_choice.h"

#include <catch2/catch.hpp>
#include <vector>

#include "absl/status/status.h"
#include "common/base/clock.h"

namespace paramd {
namespace {

constexpr absl::Duration kHungAfter = absl::Seconds(5);

TEST_CASE(
    "replica choice: a shard moves to its other replica only after a call "
    "no server served",
    "[worker][replication]") {
  FakeClock clock;
  ReplicaChoice choice({2, 2}, kHungAfter, &clock);
  CHECK(choice.current(0) == 0);
  CHECK(choice.FailOver().empty());  // Nothing noted.
  // A server's refusal says it serves; a cancel says nothing: both stay.
  choice.Note(0, absl::InvalidArgumentError("bad push"));
  choice.Note(1, absl::CancelledError("cancelled by this worker"));
  CHECK(choice.FailOver().empty());
  // UNAVAILABLE or DEADLINE_EXCEEDED: to the other replica, and back.
  choice.Note(1, absl::UnavailableError("connection refused"));
  CHECK(choice.FailOver() == std::vector<int>{1});
  CHECK(choice.current(0) == 0);
  CHECK(choice.current(1) == 1);
  choice.Note(1, absl::DeadlineExceededError("no reply"));
  CHECK(choice.FailOver() == std::vector<int>{1});
  CHECK(choice.current(1) == 0);
  CHECK(choice.FailOver().empty());  // Noted once, moved once.
}

TEST_CASE(
    "replica choice: a replica silent for longer than hung_after is hung, "
    "and any answer is hearing from it",
    "[worker][replication]") {
  FakeClock clock;
  ReplicaChoice choice({2}, kHungAfter, &clock);
  clock.Advance(kHungAfter);
  CHECK(choice.Silence(0) == kHungAfter);
  CHECK_FALSE(choice.Hung(0));  // Exactly hung_after is not longer.
  clock.Advance(absl::Nanoseconds(1));
  CHECK(choice.Hung(0));
  // Calls that found no server (or that this worker cancelled) are not
  // hearing from it.
  for (const absl::Status& none :
       {absl::UnavailableError("refused"), absl::DeadlineExceededError("slow"),
        absl::CancelledError("cancelled"), absl::UnknownError("reset")}) {
    choice.Heard(0, none);
    CHECK(choice.Hung(0));
  }
  // A refusal is an answer.
  choice.Heard(0, absl::FailedPreconditionError("not registered"));
  CHECK(choice.Silence(0) == absl::ZeroDuration());
  CHECK_FALSE(choice.Hung(0));
  clock.Advance(absl::Seconds(3));
  choice.Heard(0, absl::OkStatus());
  clock.Advance(absl::Seconds(3));
  CHECK_FALSE(choice.Hung(0));  // 3 s since the last answer.
}

TEST_CASE(
    "replica choice: a shard taken for hung waits hung_after before going "
    "back to that replica; the other replica gets a whole hung_after",
    "[worker][replication]") {
  FakeClock clock;
  ReplicaChoice choice({2, 2}, kHungAfter, &clock);
  clock.Advance(kHungAfter + absl::Seconds(1));
  REQUIRE(choice.Hung(0));
  choice.NoteHung(0, absl::UnavailableError("answered nothing"));
  CHECK(choice.FailOver() == std::vector<int>{0});
  CHECK(choice.current(0) == 1);
  CHECK_FALSE(choice.Hung(0));  // Heard from as it became current.
  // The backup refuses (its primary was heard from too recently): the
  // shard waits for it instead of going back to the hung primary.
  clock.Advance(kHungAfter - absl::Seconds(1));
  choice.Note(0, absl::UnavailableError("this is the shard's backup"));
  CHECK(choice.FailOver().empty());
  CHECK(choice.current(0) == 1);
  // The other shard is not held back.
  choice.Note(1, absl::UnavailableError("connection refused"));
  CHECK(choice.FailOver() == std::vector<int>{1});
  // Once hung_after passed, the shard may go back.
  clock.Advance(absl::Seconds(1));
  choice.Note(0, absl::UnavailableError("still refusing"));
  CHECK(choice.FailOver() == std::vector<int>{0});
  CHECK(choice.current(0) == 0);
}

TEST_CASE(
    "replica choice: a shard without a backup is never taken for hung nor "
    "moved",
    "[worker][replication]") {
  FakeClock clock;
  ReplicaChoice choice({1}, kHungAfter, &clock);
  clock.Advance(absl::Hours(1));
  CHECK_FALSE(choice.Hung(0));
  choice.NoteHung(0, absl::UnavailableError("answered nothing"));
  CHECK(choice.FailOver().empty());
  CHECK(choice.current(0) == 0);
}

}  // namespace
}  // namespace paramd
