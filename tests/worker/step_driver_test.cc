// StepDriver (worker/step/step_driver.h) over a transport in process, on a
// clock that moves only when the driver polls or sleeps: a step's calls to
// every shard, a failure cancelling the others', the attempt's limit, a
// hung shard taken for hung after exactly its hung_after and failed over
// at once, a server's cancel retried, a refusal sent again, and the calls'
// times.
#include "worker/step/step_driver.h"

#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "common/base/clock.h"
#include "tests/stepping_clock.h"

namespace paramd {
namespace {

// Time moves only when the driver waits: Poll moves it to the next
// shard's answer or to `until`, a retry's back-off by sleeping.
using testing::SteppingClock;

// One shard's answer in one attempt: `status` after `after`, with the
// shard's version; nullopt: no answer (until cancelled).
struct Answer {
  absl::Status status;
  absl::Duration after = absl::ZeroDuration();
  uint64_t version = 1;
};
using Script = std::map<std::pair<int, int>, Answer>;  // (attempt, shard)

class FakeTransport : public StepTransport {
 public:
  FakeTransport(int shards, SteppingClock* clock, ReplicaChoice* choice,
                Script script)
      : n_(shards), clock_(clock), choice_(choice), script_(script) {}

  int shards() const override { return n_; }
  void Begin(bool timed) override {
    ++attempts;
    done_.assign(n_, nullptr);
    versions_.assign(n_, 0);
    due_.clear();
    timed_ = timed;
  }
  void Start(int shard, ShardCallTimes* times,
             std::function<void(absl::Status)> done) override {
    ++started;
    done_[shard] = std::move(done);
    times_[shard] = times;
    auto it = script_.find({attempts, shard});
    if (it == script_.end()) return;  // Silent.
    versions_[shard] = it->second.version;
    due_.push_back(
        {clock_->Now() + it->second.after, shard, it->second.status});
  }
  void Cancel(int shard) override {
    ++cancels[shard];
    if (done_[shard] != nullptr) {
      due_.push_front({clock_->Now(), shard, absl::CancelledError("by you")});
    }
  }
  bool Poll(absl::Time until) override {
    // The earliest answer due, if any is due by `until`.
    auto next = due_.end();
    for (auto it = due_.begin(); it != due_.end(); ++it) {
      if (next == due_.end() || it->at < next->at) next = it;
    }
    if (next == due_.end() || next->at > until) {
      if (until == absl::InfiniteFuture()) {
        FAIL("the driver waits forever on a transport with nothing due");
      }
      clock_->MoveTo(until);
      if (on_wait) on_wait();
      return false;
    }
    clock_->MoveTo(next->at);
    const Due due = *next;
    due_.erase(next);
    if (done_[due.shard] == nullptr) return true;  // Ended before.
    if (times_[due.shard] != nullptr) {
      times_[due.shard]->pushed = clock_->Now() - absl::Milliseconds(2);
      times_[due.shard]->replied = clock_->Now() - absl::Milliseconds(1);
    }
    std::exchange(done_[due.shard], nullptr)(due.status);
    return true;
  }
  absl::StatusOr<uint64_t> Pulled() const override {
    return *std::min_element(versions_.begin(), versions_.end());
  }
  bool TakeRefusal() override { return std::exchange(refused, false); }
  bool FailOver() override { return !choice_->FailOver().empty(); }
  std::string Where(int shard) const override {
    return "10.0.0." + std::to_string(shard + 1) + ":7000";
  }

  int attempts = 0;
  int started = 0;
  std::map<int, int> cancels;
  bool refused = false;           // TakeRefusal's next answer.
  std::function<void()> on_wait;  // Runs when Poll moved the clock.

 private:
  struct Due {
    absl::Time at;
    int shard;
    absl::Status status;
  };
  const int n_;
  SteppingClock* const clock_;
  ReplicaChoice* const choice_;
  const Script script_;
  std::vector<std::function<void(absl::Status)>> done_;
  std::map<int, ShardCallTimes*> times_;
  std::vector<uint64_t> versions_;
  std::deque<Due> due_;
  bool timed_ = false;
};

StepDriver::Options Options(SteppingClock* clock) {
  StepDriver::Options o;
  o.limit = absl::Seconds(60);
  o.retry.give_up = absl::Seconds(30);
  o.retry.who = "rank 0";
  o.retry.clock = clock;
  return o;
}

TEST_CASE(
    "step driver: every shard answers; the version is the smallest, the "
    "caller's work runs once the calls are out",
    "[worker][step]") {
  SteppingClock clock;
  ReplicaChoice choice({1, 1, 1}, absl::InfiniteDuration(), &clock);
  FakeTransport transport(
      3, &clock, &choice,
      {{{1, 0}, {absl::OkStatus(), absl::Milliseconds(3), 8}},
       {{1, 1}, {absl::OkStatus(), absl::Milliseconds(9), 7}},
       {{1, 2}, {absl::OkStatus(), absl::Milliseconds(5), 8}}});
  StepDriver driver(Options(&clock), &choice);
  const absl::Time begin = clock.Now();
  int worked = 0;
  std::vector<ShardCallTimes> times;
  absl::StatusOr<uint64_t> v = driver.Step(
      &transport, 6,
      [&] {
        ++worked;
        CHECK(transport.started == 3);
        CHECK(clock.Now() == begin);  // Before any answer.
      },
      &times);
  REQUIRE(v.ok());
  CHECK(*v == 7);
  CHECK(worked == 1);
  CHECK(transport.attempts == 1);
  CHECK(transport.cancels.empty());
  CHECK(clock.Now() - begin == absl::Milliseconds(9));
  REQUIRE(times.size() == 3);
  CHECK(times[1].begin == begin);
  CHECK(times[1].end == begin + absl::Milliseconds(9));
  CHECK(times[1].replied == begin + absl::Milliseconds(8));
  CHECK(times[1].pushed == begin + absl::Milliseconds(7));
  CHECK(times[0].end == begin + absl::Milliseconds(3));
}

TEST_CASE(
    "step driver: a shard's refusal cancels the other shards' calls and is "
    "the step's error, naming the shard",
    "[worker][step]") {
  SteppingClock clock;
  ReplicaChoice choice({1, 1, 1}, absl::InfiniteDuration(), &clock);
  FakeTransport transport(
      3, &clock, &choice,
      {{{1, 1}, {absl::InvalidArgumentError("bad push"), absl::Seconds(1)}}});
  StepDriver driver(Options(&clock), &choice);
  absl::StatusOr<uint64_t> v = driver.Step(&transport, 6, nullptr, nullptr);
  CHECK(absl::IsInvalidArgument(v.status()));
  CHECK(v.status().message() == "PushPull to shard 1: bad push");
  CHECK(transport.attempts == 1);  // Not retried.
  CHECK(transport.cancels[0] == 1);
  CHECK(transport.cancels[2] == 1);
  CHECK(choice.FailOver().empty());
}

TEST_CASE(
    "step driver: an attempt no shard answers ends at its limit, every "
    "call cancelled, and is retried until give-up",
    "[worker][step]") {
  SteppingClock clock;
  ReplicaChoice choice({1, 1}, absl::InfiniteDuration(), &clock);
  FakeTransport transport(2, &clock, &choice, {});
  StepDriver::Options options = Options(&clock);
  options.retry.give_up = absl::ZeroDuration();
  StepDriver driver(options, &choice);
  const absl::Time begin = clock.Now();
  absl::StatusOr<uint64_t> v = driver.Step(&transport, 9, nullptr, nullptr);
  CHECK(absl::IsDeadlineExceeded(v.status()));
  CHECK(absl::StrContains(v.status().message(),
                          "PushPull at clock 9: no reply within 1m"));
  CHECK(absl::StrContains(v.status().message(), "gave up after 1 tries"));
  CHECK(clock.Now() - begin == absl::Seconds(60));
  CHECK(transport.cancels[0] == 1);
  CHECK(transport.cancels[1] == 1);
}

TEST_CASE(
    "step driver: with backups, a shard silent for longer than hung_after "
    "is taken for hung, and the step goes to its backup at once",
    "[worker][step][replication]") {
  SteppingClock clock;
  const absl::Duration hung_after = absl::Seconds(4);
  ReplicaChoice choice({2, 2}, hung_after, &clock);
  FakeTransport transport(2, &clock, &choice,
                          {{{1, 0}, {absl::OkStatus()}},
                           {{2, 0}, {absl::OkStatus()}},
                           {{2, 1}, {absl::OkStatus()}}});
  StepDriver driver(Options(&clock), &choice);
  const absl::Time begin = clock.Now();
  absl::StatusOr<uint64_t> v = driver.Step(&transport, 3, nullptr, nullptr);
  REQUIRE(v.ok());
  CHECK(transport.attempts == 2);
  CHECK(choice.current(0) == 0);
  CHECK(choice.current(1) == 1);
  // Watched every hung_after / 4: taken at the first look past 4 s.
  CHECK(clock.Now() - begin == absl::Seconds(5));
  CHECK(clock.sleeps.empty());  // No back-off.
}

TEST_CASE(
    "step driver: a shard heard from (its heartbeats) is not taken for hung "
    "however long its step takes",
    "[worker][step][replication]") {
  SteppingClock clock;
  ReplicaChoice choice({2, 2}, absl::Seconds(4), &clock);
  FakeTransport transport(2, &clock, &choice,
                          {{{1, 0}, {absl::OkStatus()}},
                           {{1, 1}, {absl::OkStatus(), absl::Seconds(30)}}});
  transport.on_wait = [&] { choice.Heard(1, absl::OkStatus()); };
  StepDriver driver(Options(&clock), &choice);
  absl::StatusOr<uint64_t> v = driver.Step(&transport, 3, nullptr, nullptr);
  REQUIRE(v.ok());
  CHECK(transport.attempts == 1);
  CHECK(choice.current(1) == 0);
}

TEST_CASE(
    "step driver: a call its server ended is retried, the server noted as "
    "unavailable",
    "[worker][step]") {
  SteppingClock clock;
  ReplicaChoice choice({1, 2}, absl::InfiniteDuration(), &clock);
  FakeTransport transport(
      2, &clock, &choice,
      {{{1, 0}, {absl::OkStatus()}},
       {{1, 1}, {absl::CancelledError("server stopping"), absl::Seconds(1)}},
       {{2, 0}, {absl::OkStatus()}},
       {{2, 1}, {absl::OkStatus()}}});
  StepDriver driver(Options(&clock), &choice);
  absl::StatusOr<uint64_t> v = driver.Step(&transport, 3, nullptr, nullptr);
  REQUIRE(v.ok());
  CHECK(transport.attempts == 2);
  CHECK(choice.current(1) == 1);  // Failed over to its backup.
  CHECK(clock.sleeps.empty());
}

TEST_CASE(
    "step driver: a refused way of reaching a shard sends the step again at "
    "once; the caller's work still runs once",
    "[worker][step]") {
  SteppingClock clock;
  ReplicaChoice choice({1, 1}, absl::InfiniteDuration(), &clock);
  FakeTransport transport(
      2, &clock, &choice,
      {{{1, 1},
        {absl::FailedPreconditionError("StepStream: shared memory segment")}},
       {{2, 0}, {absl::OkStatus()}},
       {{2, 1}, {absl::OkStatus()}}});
  transport.refused = true;
  StepDriver driver(Options(&clock), &choice);
  int worked = 0;
  absl::StatusOr<uint64_t> v = driver.Step(
      &transport, 3, [&] { ++worked; }, nullptr);
  REQUIRE(v.ok());
  CHECK(transport.attempts == 2);
  CHECK(worked == 1);
  CHECK(transport.cancels[0] == 1);
}

}  // namespace
}  // namespace paramd
