// Helpers shared by paramd-bench's sections: sizes, timing, percentiles.
#ifndef PARAMD_TOOLS_BENCH_BENCH_UTIL_H_
#define PARAMD_TOOLS_BENCH_BENCH_UTIL_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paramd {

using SteadyClock = std::chrono::steady_clock;

// Seconds since `start`.
double Since(SteadyClock::time_point start);

// "4K", "16M", "1G" or a plain number of bytes (or parameters), comma
// separated; errors name --`flag`.
absl::StatusOr<std::vector<int64_t>> ParseSizes(const std::string& flag,
                                                const std::string& text);

// 4096 → "4K", 16777216 → "16M".
std::string SizeName(int64_t n);

// The p-th percentile (0-100) of `v`; 0 when empty.
double Percentile(std::vector<double> v, double p);

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_BENCH_UTIL_H_
