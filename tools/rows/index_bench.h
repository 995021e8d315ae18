// rows_bench --index_bench N: the row index's choice (server/store/
// row_table.h), absl::flat_hash_map against std::unordered_map — N random
// ids inserted, then each found in another order — with the heap bytes
// each holds per entry (glibc's mallinfo2).
#ifndef PARAMD_TOOLS_ROWS_INDEX_BENCH_H_
#define PARAMD_TOOLS_ROWS_INDEX_BENCH_H_

#include <cstdint>

namespace paramd {

// Prints the table of figures; returns the process's exit code.
int IndexBench(int64_t n);

}  // namespace paramd

#endif  // PARAMD_TOOLS_ROWS_INDEX_BENCH_H_
