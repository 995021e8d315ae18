// StepQueue: the completion queue a worker's StepStreams share, polled by
// the thread that waits on a step. Events here are gRPC alarms on the real
// queue: each runs its tag on the polling thread with the operation's
// outcome, Poll ends at its deadline when nothing comes, Drain runs what
// is ready and waits for nothing, and the queue's end runs what is left.
#include "worker/rpc/step_queue.h"

#include <grpc/support/time.h>
#include <grpcpp/alarm.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "absl/time/clock.h"

namespace paramd {
namespace {

struct Recorder final : StepQueue::Tag {
  void Done(bool ok) override {
    outcomes.push_back(ok);
    threads.push_back(std::this_thread::get_id());
  }
  std::vector<bool> outcomes;
  std::vector<std::thread::id> threads;
};

gpr_timespec Past() { return gpr_time_0(GPR_CLOCK_REALTIME); }
gpr_timespec Never() { return gpr_inf_future(GPR_CLOCK_REALTIME); }

TEST_CASE("Poll runs an event's tag on the polling thread with its outcome",
          "[step_queue][rpc]") {
  StepQueue queue;
  Recorder fired, cancelled;
  grpc::Alarm due, later;
  due.Set(queue.cq(), Past(), &fired);
  later.Set(queue.cq(), Never(), &cancelled);
  later.Cancel();  // Its tag comes back with ok = false.
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (fired.outcomes.empty() || cancelled.outcomes.empty()) {
    REQUIRE(queue.Poll(limit));
  }
  CHECK(fired.outcomes == std::vector<bool>{true});
  CHECK(cancelled.outcomes == std::vector<bool>{false});
  CHECK(fired.threads[0] == std::this_thread::get_id());
  CHECK(cancelled.threads[0] == std::this_thread::get_id());
}

TEST_CASE("Poll returns false at its deadline when no event comes",
          "[step_queue][rpc]") {
  StepQueue queue;
  Recorder never;
  grpc::Alarm alarm;
  alarm.Set(queue.cq(), Never(), &never);
  CHECK_FALSE(queue.Poll(absl::Now() + absl::Milliseconds(20)));
  CHECK_FALSE(queue.Poll(absl::InfinitePast()));
  CHECK(never.outcomes.empty());
  alarm.Cancel();
  REQUIRE(queue.Poll(absl::Now() + absl::Seconds(30)));
  CHECK(never.outcomes == std::vector<bool>{false});
}

TEST_CASE("Drain runs every ready event and waits for none",
          "[step_queue][rpc]") {
  StepQueue queue;
  Recorder ready, pending;
  std::vector<grpc::Alarm> alarms(3);
  grpc::Alarm far;
  far.Set(queue.cq(), Never(), &pending);
  for (grpc::Alarm& a : alarms) {
    a.Set(queue.cq(), Never(), &ready);
    a.Cancel();
  }
  queue.Drain();
  CHECK(ready.outcomes.size() == 3);
  CHECK(pending.outcomes.empty());
  queue.Drain();  // Nothing ready: returns at once.
  CHECK(pending.outcomes.empty());
  far.Cancel();
  queue.Drain();
  CHECK(pending.outcomes == std::vector<bool>{false});
}

TEST_CASE("the queue's end runs the events left on it", "[step_queue][rpc]") {
  Recorder left;
  grpc::Alarm alarm;
  {
    StepQueue queue;
    alarm.Set(queue.cq(), Never(), &left);
    alarm.Cancel();
  }
  CHECK(left.outcomes == std::vector<bool>{false});
}

}  // namespace
}  // namespace paramd
