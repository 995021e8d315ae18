// HandlerThreads (server/rpc/handler_threads.h): a task that waits never
// holds up another — tasks that each wait for all the others to run all
// finish — and the pool's destructor waits for the tasks still running.
#include "server/rpc/handler_threads.h"

#include <catch2/catch.hpp>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paramd {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

TEST_CASE(
    "handler threads: tasks that wait for one another all run at once, on "
    "threads started for them",
    "[rpc][threads]") {
  constexpr int kTasks = 3 * HandlerThreads::kIdleThreads;
  HandlerThreads threads;
  absl::Mutex mu;
  int running = 0;
  int done = 0;
  int timed_out = 0;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kTasks; ++i) {
      threads.Run([&] {
        absl::MutexLock lock(&mu);
        ++running;
        auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
          return running >= kTasks * (round + 1);
        };
        if (!mu.AwaitWithTimeout(absl::Condition(&all), kTimeout)) {
          ++timed_out;
        }
        ++done;
      });
    }
    absl::MutexLock lock(&mu);
    auto finished = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return done == kTasks * (round + 1);
    };
    REQUIRE(mu.AwaitWithTimeout(absl::Condition(&finished), kTimeout));
    CHECK(timed_out == 0);
  }
  CHECK(threads.threads() >= HandlerThreads::kIdleThreads);
}

TEST_CASE("handler threads: the destructor waits for the running tasks",
          "[rpc][threads]") {
  absl::Mutex mu;
  bool started = false;
  bool release = false;
  bool finished = false;
  auto threads = std::make_unique<HandlerThreads>();
  threads->Run([&] {
    absl::MutexLock lock(&mu);
    started = true;
    mu.Await(absl::Condition(&release));
    finished = true;
  });
  {
    absl::MutexLock lock(&mu);
    REQUIRE(mu.AwaitWithTimeout(absl::Condition(&started), kTimeout));
    release = true;
  }
  threads.reset();
  absl::MutexLock lock(&mu);
  CHECK(finished);
}

}  // namespace
}  // namespace paramd
