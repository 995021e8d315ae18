// paramd-bench's ceilings: what this machine allows, measured in the same
// run as paramd so that the two compare (the machine's speed drifts).
#ifndef PARAMD_TOOLS_BENCH_BENCH_CEILINGS_H_
#define PARAMD_TOOLS_BENCH_BENCH_CEILINGS_H_

#include "absl/status/statusor.h"

namespace paramd {

struct Ceilings {
  double memcpy_bps = 0;  // Bytes copied per second (64 MiB buffers).
  double axpy_bps = 0;    // Memory traffic per second of an in-place axpy.
  double tcp_bps = 0;     // Raw TCP over loopback, 1 MiB writes.
  double tcp_rtt = 0;     // 4 KiB ping-pong round trip, p50 seconds.
};

// Measures every ceiling (about 2.3 s) and prints them.
absl::StatusOr<Ceilings> MeasureCeilings();

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_BENCH_CEILINGS_H_
