// HandlerThreads: threads for work that may wait, such as a unary pull
// that waits for its version under sync. Each task runs at once on an idle
// thread, or on a new one when none is idle, so a task that waits never
// holds up another (as gRPC's synchronous server ran its handlers); up to
// kIdleThreads idle threads are kept for the next tasks, the others end.
//
// Thread-safe. The destructor waits for the tasks still running.
#ifndef PARAMD_SERVER_RPC_HANDLER_THREADS_H_
#define PARAMD_SERVER_RPC_HANDLER_THREADS_H_

#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace paramd {

class HandlerThreads {
 public:
  static constexpr int kIdleThreads = 4;

  HandlerThreads() = default;
  ~HandlerThreads();
  HandlerThreads(const HandlerThreads&) = delete;
  HandlerThreads& operator=(const HandlerThreads&) = delete;

  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Threads started and not yet ended (for tests).
  int threads() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Runs tasks until none is left and enough threads are idle (or the
  // pool is destroyed).
  void Work() ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the threads that ended.
  void JoinEnded() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::thread::id, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  // Ended, to be joined by the next Run or the destructor.
  std::vector<std::thread> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_HANDLER_THREADS_H_
