// Process-wide settings for paramd's long-running binaries, made once at
// the top of main.
#ifndef PARAMD_COMMON_PROCESS_SETUP_H_
#define PARAMD_COMMON_PROCESS_SETUP_H_

namespace paramd {

// - Keeps large blocks in the heap: glibc otherwise maps every block over
//   its threshold fresh from the OS and a message buffer then pays a page
//   fault per 4 KiB on first touch (~10% of a training run's CPU time).
// - Turns off Abseil's mutex deadlock detection, a debugging aid that
//   costs a graph lookup on every lock.
void SetUpProcess();

}  // namespace paramd

#endif  // PARAMD_COMMON_PROCESS_SETUP_H_
