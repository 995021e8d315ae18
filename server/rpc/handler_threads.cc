#include "server/rpc/handler_threads.h"

#include <utility>

namespace paramd {

HandlerThreads::~HandlerThreads() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Each thread ends once the tasks are done.
    auto gone = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return threads_.empty();
    };
    mu_.Await(absl::Condition(&gone));
  }
  JoinEnded();
}

void HandlerThreads::Run(std::function<void()> task) {
  std::vector<std::thread> ended;
  {
    absl::MutexLock lock(&mu_);
    ended.swap(ended_);
    tasks_.push_back(std::move(task));
    // An idle thread takes the task; with none idle, one more thread. Idle
    // threads may each have been promised a task already: count them off.
    if (idle_ < static_cast<int>(tasks_.size())) {
      std::thread thread([this] { Work(); });
      threads_.emplace(thread.get_id(), std::move(thread));
    }
  }
  // Threads that ended, joined outside the lock.
  for (std::thread& thread : ended) thread.join();
}

int HandlerThreads::threads() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

void HandlerThreads::Work() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      mu_.Unlock();
      task();
      task = nullptr;  // What it holds goes outside the lock.
      mu_.Lock();
      continue;
    }
    if (stopping_ || idle_ >= kIdleThreads) break;
    ++idle_;
    auto more = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !tasks_.empty() || stopping_;
    };
    mu_.Await(absl::Condition(&more));
    --idle_;
  }
  // This thread ends: another joins it.
  auto self = threads_.find(std::this_thread::get_id());
  ended_.push_back(std::move(self->second));
  threads_.erase(self);
}

void HandlerThreads::JoinEnded() {
  std::vector<std::thread> ended;
  {
    absl::MutexLock lock(&mu_);
    ended.swap(ended_);
  }
  for (std::thread& thread : ended) thread.join();
}

}  // namespace paramd
