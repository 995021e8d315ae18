#include "common/base/process_setup.h"

#include <malloc.h>
#include <stdlib.h>
#include <xmmintrin.h>

#include <cstring>

#include "absl/synchronization/mutex.h"

namespace paramd {

void EnableFlushToZero() {
  // MXCSR bits 15 (FTZ: denormal results become zero) and 6 (DAZ: denormal
  // inputs read as zero).
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

void ChooseGrpcPoller() {
  setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  if (std::strcmp(getenv("GRPC_POLL_STRATEGY"), "poll") != 0) return;
  // Under "poll" a channel's connection makes progress only while a call
  // on it is polled, or when gRPC's backup poller runs (every 5 s by
  // default): a worker failing over between replicas, its calls failing
  // fast, then reconnected to a restarted server seconds late — long
  // enough for its lease to lapse (replica_process_test caught it, 4 runs
  // in 8). Every 100 ms instead: ten wake-ups a second.
  setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100",
         /*overwrite=*/0);
}

void SetUpProcess() {
  EnableFlushToZero();
  ChooseGrpcPoller();
  // Blocks up to 1 GiB come from the heap and freed memory up to 1 GiB
  // stays with the process for reuse.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace paramd
