#include "common/base/process_setup.h"

#include <malloc.h>
#include <xmmintrin.h>

#include "absl/synchronization/mutex.h"

namespace paramd {

void EnableFlushToZero() {
  // MXCSR bits 15 (FTZ: denormal results become zero) and 6 (DAZ: denormal
  // inputs read as zero).
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

void SetUpProcess() {
  EnableFlushToZero();
  // Blocks up to 1 GiB come from the heap and freed memory up to 1 GiB
  // stays with the process for reuse.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace paramd
