// Heartbeats: a rank's heartbeats to every shard, sent from a thread of its
// own every `every` with the clock the training loop last set, so that the
// rank's lease holds while it computes. paramd-worker's Trainer and the
// framework worker (python/native/framework_worker.h) each keep one.
//
// Thread-safe.
#ifndef PARAMD_WORKER_HEARTBEATS_H_
#define PARAMD_WORKER_HEARTBEATS_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/parameter_client.h"

namespace paramd {

class Heartbeats {
 public:
  // `client` outlives this.
  Heartbeats(ParameterClient* client, absl::Duration every)
      : client_(client), every_(every) {}
  ~Heartbeats() { Stop(); }

  // Starts the thread; later calls do nothing.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // The clock the next heartbeat carries.
  void SetClock(uint64_t clock) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t clock() const ABSL_LOCKS_EXCLUDED(mu_);
  // Stops and joins the thread: no heartbeat is sent after it returns.
  // True when this call stopped a running thread (false before Start and
  // on later calls).
  bool Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  ParameterClient* const client_;
  const absl::Duration every_;
  std::thread thread_;  // Started and joined by the training loop's thread.

  mutable absl::Mutex mu_;
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_HEARTBEATS_H_
