#include "server/worker_registry.h"

namespace paramd {

WorkerRegistry::WorkerRegistry(int num_workers) : workers_(num_workers) {}

void WorkerRegistry::OnRegister(int rank, uint64_t clock, absl::Time now) {
  absl::MutexLock lock(&mu_);
  WorkerInfo& w = workers_[rank];
  w.registered = true;
  w.clock = clock;
  w.last_seen = now;
}

void WorkerRegistry::OnPush(int rank, uint64_t new_clock, uint64_t bytes,
                            absl::Time now) {
  absl::MutexLock lock(&mu_);
  WorkerInfo& w = workers_[rank];
  w.clock = new_clock;
  ++w.pushes;
  w.bytes_in += bytes;
  w.last_seen = now;
}

void WorkerRegistry::OnPull(int rank, uint64_t bytes, absl::Time now) {
  absl::MutexLock lock(&mu_);
  WorkerInfo& w = workers_[rank];
  ++w.pulls;
  w.bytes_out += bytes;
  w.last_seen = now;
}

void WorkerRegistry::OnHeartbeat(int rank, absl::Time now) {
  absl::MutexLock lock(&mu_);
  workers_[rank].last_seen = now;
}

std::vector<WorkerInfo> WorkerRegistry::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return workers_;
}

}  // namespace paramd
