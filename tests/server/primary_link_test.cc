// PrimaryLink: what becomes of each Replicate the primary sends, over a
// scripted peer on a fake clock: an answer puts the backup in sync; a
// refusal at a newer term replaces this process; a backup that does not
// answer is left behind, not sent steps, and caught up at the next tick
// after a second; one in sync that misses a deadline gets one more try;
// one silent for a lease is in doubt, and still in doubt gives the shard
// up; a keep-alive is due a quarter lease after the last send.
#include "server/replication/primary_link.h"

#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/base/clock.h"

namespace paramd {
namespace {

constexpr absl::Duration kLease = absl::Seconds(8);

// Answers each Replicate with the next scripted status (OK once the
// script is empty), moving the clock by `took` first.
class ScriptedPeer final : public ReplicaPeer {
 public:
  ScriptedPeer(FakeClock* clock, std::deque<absl::Status>* script,
               std::vector<absl::Duration>* timeouts)
      : clock_(clock), script_(script), timeouts_(timeouts) {}

  absl::Status Replicate(std::shared_ptr<const proto::ReplicateRequest>,
                         absl::Duration timeout,
                         proto::ReplicateResponse*) override {
    timeouts_->push_back(timeout);
    clock_->Advance(took);
    if (script_->empty()) return absl::OkStatus();
    absl::Status s = script_->front();
    script_->pop_front();
    return s;
  }
  absl::Status Handover(const proto::HandoverRequest&, absl::Duration,
                        proto::HandoverResponse*) override {
    return absl::UnimplementedError("not scripted");
  }

  absl::Duration took = absl::Milliseconds(1);

 private:
  FakeClock* const clock_;
  std::deque<absl::Status>* const script_;
  std::vector<absl::Duration>* const timeouts_;
};

struct Fixture {
  Fixture() {
    slot.Set(
        [this](const std::string&) -> std::unique_ptr<ReplicaPeer> {
          auto peer =
              std::make_unique<ScriptedPeer>(&clock, &script, &timeouts);
          last = peer.get();
          return peer;
        },
        "backup:1");
  }

  std::shared_ptr<const proto::ReplicateRequest> Step(uint64_t version) {
    auto request = std::make_shared<proto::ReplicateRequest>();
    request->mutable_state()->set_version(version);
    return request;
  }
  std::shared_ptr<const proto::ReplicateRequest> KeepAlive() {
    return std::make_shared<proto::ReplicateRequest>();
  }

  FakeClock clock;
  std::deque<absl::Status> script;
  std::vector<absl::Duration> timeouts;
  ScriptedPeer* last = nullptr;
  PeerSlot slot{3};
  int replaced = 0;
  PrimaryLink link{3, kLease, &clock, &slot, [this] { ++replaced; }};
};

proto::ReplicaStatus Status(const PrimaryLink& link) {
  proto::ReplicaStatus status;
  link.FillStatus(&status);
  return status;
}

TEST_CASE(
    "an answered step puts the backup in sync; keep-alives are due "
    "a quarter lease after the last send",
    "[replication][server]") {
  Fixture f;
  CHECK_FALSE(Status(f.link).peer_in_sync());
  CHECK(Status(f.link).peer_silent_seconds() == -1);
  REQUIRE(f.link.StepSends(4));
  CHECK(f.link.Send(f.Step(4), 4) == PrimaryLink::Sent::kAnswered);
  CHECK(f.timeouts == std::vector<absl::Duration>{absl::Seconds(2)});
  const proto::ReplicaStatus s = Status(f.link);
  CHECK(s.peer_in_sync());
  CHECK(s.lag_versions() == 0);
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kNothing);
  f.clock.Advance(kLease / 4 - absl::Milliseconds(2));
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kNothing);
  f.clock.Advance(absl::Milliseconds(2));
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kKeepAlive);
  CHECK(f.link.SendSettled(f.KeepAlive(), 0).ok());
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kNothing);
  CHECK(f.replaced == 0);
}

TEST_CASE(
    "a backup that does not answer is left behind: steps go on "
    "without it, and a tick catches it up a second later",
    "[replication][server]") {
  Fixture f;
  REQUIRE(f.link.SendSettled(f.Step(1), 1).ok());
  f.script.push_back(absl::UnavailableError("connection refused"));
  REQUIRE(f.link.StepSends(2));
  // Unanswered, but heard from within the lease: acknowledged alone.
  CHECK(f.link.SendSettled(f.Step(2), 2).ok());
  CHECK(f.timeouts.size() == 2);  // Refused at once: no second try.
  CHECK_FALSE(Status(f.link).peer_in_sync());
  CHECK_FALSE(f.link.StepSends(3));
  CHECK(Status(f.link).lag_versions() == 2);  // Versions 2 and 3 unsent.
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kNothing);
  f.clock.Advance(absl::Seconds(1));
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kCatchUp);
  // The catch-up's keep-alive goes unanswered: tried again a second on.
  f.script.push_back(absl::UnavailableError("connection refused"));
  CHECK(f.link.Send(f.KeepAlive(), 0) == PrimaryLink::Sent::kLeftBehind);
  f.link.CatchUpAnswered(false);
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kNothing);
  f.clock.Advance(absl::Seconds(1));
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kCatchUp);
  // Answered: steps send again; the whole state puts it in sync.
  CHECK(f.link.Send(f.KeepAlive(), 0) == PrimaryLink::Sent::kAnswered);
  f.link.CatchUpAnswered(true);
  CHECK(f.link.StepSends(3));
  CHECK_FALSE(Status(f.link).peer_in_sync());  // A keep-alive holds no state.
  CHECK(f.link.Send(f.Step(3), 3) == PrimaryLink::Sent::kAnswered);
  CHECK(Status(f.link).peer_in_sync());
  CHECK(f.replaced == 0);
}

TEST_CASE("a backup in sync that misses a deadline gets one more try",
          "[replication][server]") {
  Fixture f;
  REQUIRE(f.link.SendSettled(f.Step(1), 1).ok());
  f.script.push_back(absl::DeadlineExceededError("slow"));
  CHECK(f.link.SendSettled(f.Step(2), 2).ok());
  CHECK(f.timeouts.size() == 3);
  CHECK(Status(f.link).peer_in_sync());
  // Twice slow: left behind.
  f.script.push_back(absl::DeadlineExceededError("slow"));
  f.script.push_back(absl::DeadlineExceededError("slow"));
  CHECK(f.link.SendSettled(f.Step(3), 3).ok());
  CHECK(f.timeouts.size() == 5);
  CHECK_FALSE(Status(f.link).peer_in_sync());
  CHECK(f.replaced == 0);
}

TEST_CASE("a refusal at a newer term replaces this process",
          "[replication][server]") {
  Fixture f;
  f.script.push_back(absl::FailedPreconditionError("serves at term 2"));
  const absl::Status s = f.link.SendSettled(f.Step(1), 1);
  CHECK(absl::IsUnavailable(s));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("replaced by its backup at backup:1"));
  CHECK(f.replaced == 1);
}

TEST_CASE(
    "a backup in sync that has not heard this process for a lease "
    "may have taken over: in doubt, tried once more, then the shard "
    "is given up",
    "[replication][server]") {
  Fixture f;
  REQUIRE(f.link.SendSettled(f.Step(1), 1).ok());
  f.clock.Advance(kLease);  // This process was paused.
  f.script.push_back(absl::UnavailableError("no answer"));
  f.script.push_back(absl::UnavailableError("no answer"));
  CHECK(absl::IsUnavailable(f.link.SendSettled(f.Step(2), 2)));
  CHECK(f.replaced == 1);

  // The second try's answer settles it: the step is acknowledged.
  Fixture g;
  REQUIRE(g.link.SendSettled(g.Step(1), 1).ok());
  g.clock.Advance(kLease);
  g.script.push_back(absl::UnavailableError("no answer"));
  CHECK(g.link.SendSettled(g.Step(2), 2).ok());
  CHECK(g.replaced == 0);
  CHECK(Status(g.link).peer_in_sync());
}

TEST_CASE("a new backup, or a takeover, is caught up at the next tick",
          "[replication][server]") {
  Fixture f;
  REQUIRE(f.link.SendSettled(f.Step(1), 1).ok());
  f.link.NewPeer();
  CHECK_FALSE(Status(f.link).peer_in_sync());
  CHECK(f.link.StepSends(2));  // No try failed yet: steps send.
  CHECK(f.link.DueAt(f.clock.Now()) == PrimaryLink::Due::kCatchUp);

  Fixture g;
  g.link.StartServing(7);
  CHECK(Status(g.link).lag_versions() == 7);
  CHECK_FALSE(g.link.StepSends(8));  // Until the tick's catch-up answers.
  CHECK(g.link.DueAt(g.clock.Now()) == PrimaryLink::Due::kCatchUp);
}

}  // namespace
}  // namespace paramd
