// paramd-bench's optimizer section: every optimizer's apply throughput,
// one thread, as a fraction of the memory-bandwidth bound for the bytes
// it must touch.
#ifndef PARAMD_TOOLS_BENCH_BENCH_OPTIMIZERS_H_
#define PARAMD_TOOLS_BENCH_BENCH_OPTIMIZERS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace paramd {

// Runs and prints every optimizer at every size (parameters) against
// `bandwidth` (bytes of memory traffic per second); adds (name, fraction
// of the bound) at 16M parameters to `at_16m`.
absl::Status RunOptimizerSection(
    const std::vector<int64_t>& sizes, double bandwidth,
    std::vector<std::pair<std::string, double>>* at_16m);

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_BENCH_OPTIMIZERS_H_
