// Timing for paramd's benchmarks.
#ifndef PARAMD_TOOLS_BENCH_BENCH_TIMING_H_
#define PARAMD_TOOLS_BENCH_BENCH_TIMING_H_

#include <chrono>
#include <cstdint>

namespace paramd {

// Calls `fn` once to warm up, then repeatedly for about `seconds`; returns
// the seconds per call, or -1 as soon as a call returns false (failed).
template <typename Fn>
double SecondsPerCall(double seconds, Fn fn) {
  using Clock = std::chrono::steady_clock;
  if (!fn()) return -1;
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    if (!fn()) return -1;
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return elapsed / calls;
}

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_BENCH_TIMING_H_
