#include "worker/heartbeats.h"

namespace paramd {

void Heartbeats::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Heartbeats::SetClock(uint64_t clock) {
  absl::MutexLock lock(&mu_);
  clock_ = clock;
}

uint64_t Heartbeats::clock() const {
  absl::MutexLock lock(&mu_);
  return clock_;
}

bool Heartbeats::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return false;
    stopping_ = true;
  }
  thread_.join();
  return true;
}

void Heartbeats::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), every_);
    if (stopping_) break;
    const uint64_t clock = clock_;
    mu_.Unlock();
    client_->Heartbeat(clock, /*finished=*/false, every_);
    mu_.Lock();
  }
}

}  // namespace paramd
