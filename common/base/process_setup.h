// Process-wide settings for paramd's long-running binaries, made once at
// the top of main.
#ifndef PARAMD_COMMON_BASE_PROCESS_SETUP_H_
#define PARAMD_COMMON_BASE_PROCESS_SETUP_H_

namespace paramd {

// - Keeps large blocks in the heap: glibc otherwise maps every block over
//   its threshold fresh from the OS and a message buffer then pays a page
//   fault per 4 KiB on first touch (~10% of a training run's CPU time).
// - Turns off Abseil's mutex deadlock detection, a debugging aid that
//   costs a graph lookup on every lock.
// - EnableFlushToZero, before any thread starts (threads inherit it).
void SetUpProcess();

// Treats denormal floats as zero in this thread and the threads it starts
// from now on. Momentum buffers of parameters whose gradient stays zero
// (dead ReLU units) decay into the denormal range after ~800 steps, and
// every operation on a denormal costs ~100 cycles: async training fell from
// ~25k to ~10k samples/s after its first epoch (docs/performance.md).
// Values below 1.2e-38 carry nothing for training.
void EnableFlushToZero();

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_PROCESS_SETUP_H_
