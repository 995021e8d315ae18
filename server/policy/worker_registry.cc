#include "server/policy/worker_registry.h"

#include <algorithm>

namespace paramd {

WorkerRegistry::WorkerRegistry(int num_workers) : workers_(num_workers) {}

void WorkerRegistry::OnRegister(int rank, uint64_t incarnation,
                                absl::Time now) {
  absl::MutexLock lock(&mu_);
  WorkerInfo& w = workers_[rank];
  if (!w.registered || w.incarnation != incarnation) ++w.registrations;
  w.incarnation = incarnation;
  w.registered = true;
  w.finished = false;
  w.last_seen = now;
  job_start_ = std::min(job_start_, now);
}

void WorkerRegistry::OnSeen(int rank, absl::Time now) {
  absl::MutexLock lock(&mu_);
  workers_[rank].last_seen = now;
}

void WorkerRegistry::OnHeartbeat(int rank, absl::Time now) {
  absl::MutexLock lock(&mu_);
  workers_[rank].last_seen = now;
  workers_[rank].last_heartbeat = now;
}

bool WorkerRegistry::IsRegistered(int rank) const {
  absl::MutexLock lock(&mu_);
  return workers_[rank].registered;
}

void WorkerRegistry::OnPush(int rank, uint64_t bytes, float loss,
                            absl::Time now, bool whole) {
  absl::MutexLock lock(&mu_);
  WorkerInfo& w = workers_[rank];
  w.bytes_in += bytes;
  w.last_seen = now;
  if (!whole) return;
  ++w.pushes;
  w.last_loss = loss;
  w.last_push = now;
}

void WorkerRegistry::OnPull(int rank, uint64_t bytes, absl::Time now,
                            bool whole) {
  absl::MutexLock lock(&mu_);
  WorkerInfo& w = workers_[rank];
  if (whole) ++w.pulls;
  w.bytes_out += bytes;
  w.last_seen = now;
}

void WorkerRegistry::OnFinished(int rank, absl::Time now) {
  absl::MutexLock lock(&mu_);
  workers_[rank].finished = true;
  workers_[rank].last_seen = now;
}

absl::Time WorkerRegistry::job_start() const {
  absl::MutexLock lock(&mu_);
  return job_start_;
}

std::vector<WorkerInfo> WorkerRegistry::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return workers_;
}

}  // namespace paramd
