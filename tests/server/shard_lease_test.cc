// The shard's leases and liveness on a fake clock: silent, unregistered and
// finished workers leave the live set and the job goes on; waiting pulls
// say what they wait on; a retried push is applied once.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "common/base/half.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;

// Leases on a fake clock: no test here sleeps.
struct LeaseFixture {
  explicit LeaseFixture(const std::string& policy) {
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.layers = "[784, 8, 10]";
    o.policy = policy;
    o.staleness = 1;
    o.lease_seconds = 4;
    o.stall_warn_seconds = 2;
    config = testing::MakeJob(o, testing::NewTempDir());
    shard = *Shard::Create(config, 0, &clock);
  }

  // Both phases, as a worker does.
  void Register(uint32_t rank, uint64_t expect_clock) {
    proto::RegisterRequest req;
    req.set_job_id(config.job_id);
    req.set_rank(rank);
    req.set_plan_fingerprint(shard->plan().fingerprint());
    req.set_incarnation(++incarnation);
    proto::RegisterResponse resp;
    REQUIRE(shard->Register(req, &resp).ok());
    CHECK(resp.clock() == expect_clock);
    req.set_join(true);
    req.set_clock(resp.clock());
    REQUIRE(shard->Register(req, &resp).ok());
    CHECK(resp.clock() == expect_clock);
  }

  void Heartbeat(uint32_t rank, bool finished = false) {
    proto::HeartbeatRequest req;
    req.set_job_id(config.job_id);
    req.set_rank(rank);
    req.set_finished(finished);
    proto::HeartbeatResponse resp;
    REQUIRE(shard->Heartbeat(req, &resp).ok());
  }

  absl::Status Push(uint32_t rank, uint64_t clock) {
    proto::PushRequest r =
        testing::WholePush(*shard, config.job_id, rank, clock, 0.0f);
    r.set_loss(0.25f);
    proto::PushResponse resp;
    return shard->Push(r, &resp);
  }

  absl::Status TryPull(uint32_t rank, uint64_t clock) {
    proto::PullResponse resp;
    return testing::PullInto(*shard,
                             testing::PullAt(config.job_id, rank, clock),
                             absl::InfinitePast(), nullptr, &resp);
  }

  proto::ShardStatus Status() {
    proto::ShardStatus st;
    shard->GetStatus(&st);
    return st;
  }

  // A pull of `rank` at `clock` on a thread of its own, returned once the
  // shard holds it waiting; it must succeed when it ends.
  std::thread StartWaitingPull(uint32_t rank, uint64_t clock) {
    std::thread pull([this, rank, clock] {
      proto::PullResponse resp;
      CHECK(testing::PullInto(*shard,
                              testing::PullAt(config.job_id, rank, clock),
                              absl::InfiniteFuture(), nullptr, &resp)
                .ok());
    });
    REQUIRE(shard->TEST_AwaitWaitingPulls(1, absl::Seconds(30)));
    return pull;
  }

  FakeClock clock;
  JobConfig config;
  std::unique_ptr<Shard> shard;
  uint64_t incarnation = 0;
};

TEST_CASE("a silent worker is dropped after its lease and sync goes on",
          "[shard][liveness]") {
  LeaseFixture f("sync");
  f.Register(0, 0);
  f.Register(1, 0);
  REQUIRE(f.Push(0, 0).ok());
  CHECK(absl::IsDeadlineExceeded(f.TryPull(0, 1)));
  f.clock.Advance(absl::Seconds(3));
  f.Heartbeat(0);
  f.shard->Tick();
  CHECK(f.Status().workers(1).state() == "live");  // 3 s < 4 s lease
  f.clock.Advance(absl::Seconds(2));
  f.shard->Tick();  // rank 1: 5 s silent
  proto::ShardStatus st = f.Status();
  CHECK(st.workers(0).state() == "live");
  CHECK(st.workers(1).state() == "dead");
  CHECK(st.workers(0).last_loss() == Approx(0.25f));
  CHECK(st.version() == 1);  // the round completed without rank 1
  CHECK(f.TryPull(0, 1).ok());
  CHECK(absl::IsAborted(f.Push(1, 0)));  // "register again"
  // It registers again and rejoins at the current round.
  f.Register(1, 1);
  st = f.Status();
  CHECK(st.workers(1).state() == "live");
  CHECK(st.workers(1).registrations() == 2);
  REQUIRE(f.Push(1, 1).ok());
  REQUIRE(f.Push(0, 1).ok());
  CHECK(f.Status().version() == 2);
}

TEST_CASE(
    "a worker that never registers is dropped a lease after the job "
    "starts",
    "[shard][liveness]") {
  LeaseFixture f("ssp");
  f.clock.Advance(absl::Seconds(60));  // before the job: no lease runs
  f.shard->Tick();
  CHECK(f.Status().workers(1).state() == "waiting");
  f.Register(0, 0);
  REQUIRE(f.Push(0, 0).ok());
  REQUIRE(f.Push(0, 1).ok());
  CHECK(absl::IsDeadlineExceeded(f.TryPull(0, 2)));  // 2 ahead of rank 1
  f.clock.Advance(absl::Seconds(4.5));
  f.Heartbeat(0);
  f.shard->Tick();
  CHECK(f.Status().workers(1).state() == "dead");
  CHECK(f.TryPull(0, 2).ok());
}

TEST_CASE("a finished worker leaves without waiting for its lease",
          "[shard][liveness]") {
  LeaseFixture f("ssp");
  f.Register(0, 0);
  f.Register(1, 0);
  REQUIRE(f.Push(0, 0).ok());
  REQUIRE(f.Push(0, 1).ok());
  CHECK(absl::IsDeadlineExceeded(f.TryPull(0, 2)));
  f.Heartbeat(1, /*finished=*/true);
  CHECK(f.Status().workers(1).state() == "finished");
  CHECK(f.TryPull(0, 2).ok());
}

TEST_CASE("a long pull is shown in status with what it waits on",
          "[shard][diagnostics]") {
  LeaseFixture f("sync");
  f.Register(0, 0);
  f.Register(1, 0);
  REQUIRE(f.Push(0, 0).ok());
  std::thread pull = f.StartWaitingPull(0, 1);
  f.clock.Advance(absl::Seconds(3));  // past stall_warn_seconds (2)
  f.shard->Tick();                    // logs it (warning 1)
  proto::ShardStatus st = f.Status();
  REQUIRE(st.waiting_size() == 1);
  CHECK(st.waiting(0).rank() == 0);
  CHECK(st.waiting(0).clock() == 1);
  CHECK(st.waiting(0).waited_seconds() == Approx(3.0));
  CHECK(st.waiting(0).waiting_on() ==
        "version 1: round 0 waits for rank(s) 1 to push clock 0");
  REQUIRE(f.Push(1, 0).ok());
  pull.join();
  CHECK(f.shard->TEST_AwaitWaitingPulls(0, absl::Seconds(30)));
  st = f.Status();
  CHECK(st.waiting_size() == 0);
  CHECK(st.pull_wait_p99_ms() == Approx(3000.0));
  CHECK(st.pushes_per_second() == Approx(2 / 3.0));  // 2 pushes in 3 s
}

// The text spdlog writes while it lives.
class LogCapture {
 public:
  LogCapture()
      : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::find(sinks.begin(), sinks.end(), sink_));
  }
  std::string text() {
    sink_->flush();
    return text_.str();
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST_CASE(
    "a stalled pull is logged naming the rank it waits for, again with "
    "back-off, and marked in status",
    "[shard][diagnostics][stall]") {
  LeaseFixture f("sync");  // stall_warn_seconds 2, lease 4
  f.Register(0, 0);
  f.Register(1, 0);
  REQUIRE(f.Push(0, 0).ok());
  f.Heartbeat(1);
  std::thread pull = f.StartWaitingPull(0, 1);
  LogCapture log;
  f.clock.Advance(absl::Seconds(1.5));
  f.shard->Tick();  // not a stall yet
  proto::ShardStatus st = f.Status();
  CHECK(st.stall_warnings() == 0);
  REQUIRE(st.waiting_size() == 1);
  CHECK_FALSE(st.waiting(0).stalled());
  CHECK(st.waiting(0).waits_for_size() == 1);
  CHECK_FALSE(st.workers(1).stalling());

  f.clock.Advance(absl::Seconds(1));  // 2.5 s > 2 s
  f.shard->Tick();
  CHECK(absl::StrContains(
      log.text(),
      "shard 0: stall: a pull of rank 0 at clock 1 has waited 2.5s for "
      "version 1: round 0 waits for rank(s) 1 to push clock 0; rank 1: live, "
      "no push yet, last heartbeat 2.5s ago (warning 1, next after 4s of "
      "waiting)"));
  st = f.Status();
  CHECK(st.stall_warn_seconds() == 2);
  CHECK(st.stall_warnings() == 1);
  REQUIRE(st.waiting_size() == 1);
  CHECK(st.waiting(0).stalled());
  REQUIRE(st.waiting(0).waits_for_size() == 1);
  CHECK(st.waiting(0).waits_for(0) == 1);
  CHECK(st.workers(1).stalling());
  CHECK_FALSE(st.workers(0).stalling());
  CHECK(st.workers(1).last_heartbeat_seconds_ago() == Approx(2.5));
  CHECK(st.workers(1).last_push_seconds_ago() == -1);
  CHECK(st.workers(0).last_push_seconds_ago() == Approx(2.5));

  // Again after 4 s of waiting, then after 8 s; not in between.
  f.Heartbeat(1);
  f.clock.Advance(absl::Seconds(1));  // 3.5 s
  f.shard->Tick();
  CHECK(f.Status().stall_warnings() == 1);
  f.clock.Advance(absl::Seconds(1));  // 4.5 s
  f.shard->Tick();
  CHECK(f.Status().stall_warnings() == 2);
  CHECK(absl::StrContains(log.text(), "(warning 2, next after 8s of waiting)"));
  f.Heartbeat(1);
  f.clock.Advance(absl::Seconds(3.6));  // 8.1 s
  f.shard->Tick();
  CHECK(f.Status().stall_warnings() == 3);
  CHECK(f.Status().workers(1).state() == "live");  // heartbeats kept it

  REQUIRE(f.Push(1, 0).ok());
  pull.join();
  REQUIRE(f.shard->TEST_AwaitWaitingPulls(0, absl::Seconds(30)));
  st = f.Status();
  CHECK(st.waiting_size() == 0);
  CHECK_FALSE(st.workers(1).stalling());
  CHECK(st.stall_warnings() == 3);
}

TEST_CASE(
    "under every policy a retried push is acknowledged as a duplicate and "
    "applied once",
    "[shard][exactly-once]") {
  for (const char* policy : {"sync", "async", "ssp"}) {
    SECTION(policy) {
      LeaseFixture f(policy);
      f.Register(0, 0);
      f.Register(1, 0);
      const proto::PushRequest push =
          testing::WholePush(*f.shard, f.config.job_id, 0, 0, 1.0f);
      proto::PushResponse first, retry;
      REQUIRE(f.shard->Push(push, &first).ok());
      CHECK_FALSE(first.duplicate());
      proto::ShardStatus before = f.Status();
      // The same request again, as after a lost reply.
      REQUIRE(f.shard->Push(push, &retry).ok());
      CHECK(retry.duplicate());
      CHECK(retry.version() == first.version());
      proto::ShardStatus after = f.Status();
      CHECK(after.version() == before.version());
      CHECK(after.pushes() == before.pushes());
      // Rank 1 completes the round (sync) or steps (async, ssp); rank 0's
      // retry still applies nothing, and its next clock is applied.
      REQUIRE(f.Push(1, 0).ok());
      const uint64_t version = f.Status().version();
      REQUIRE(f.shard->Push(push, &retry).ok());
      CHECK(retry.duplicate());
      CHECK(f.Status().version() == version);
      REQUIRE(f.Push(0, 1).ok());
      CHECK(absl::IsFailedPrecondition(f.shard->Push(push, &retry)));
    }
  }
}

}  // namespace
}  // namespace paramd
