#include "tools/rows/index_bench.h"

#include <malloc.h>

#include <cstdio>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"

namespace paramd {
namespace {

size_t HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // Small blocks and mmap'd ones.
}

template <typename Map>
void IndexRow(const char* name, const std::vector<uint64_t>& ids,
              const std::vector<uint64_t>& lookups) {
  const size_t before = HeapBytes();
  const absl::Time start = absl::Now();
  auto* map = new Map();
  for (size_t i = 0; i < ids.size(); ++i) {
    map->emplace(ids[i], static_cast<uint32_t>(i));
  }
  const absl::Time inserted = absl::Now();
  uint64_t sum = 0;
  for (uint64_t id : lookups) sum += map->find(id)->second;
  const absl::Time found = absl::Now();
  const size_t bytes = HeapBytes() - before;
  std::printf("%-28s %10.1f %10.1f %12.1f   (checksum %llu)\n", name,
              absl::ToDoubleNanoseconds(inserted - start) / ids.size(),
              absl::ToDoubleNanoseconds(found - inserted) / ids.size(),
              static_cast<double>(bytes) / ids.size(),
              static_cast<unsigned long long>(sum));
  delete map;
}

}  // namespace

int IndexBench(int64_t n) {
  std::vector<uint64_t> ids(n);
  uint64_t x = 1;
  for (uint64_t& id : ids) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    id = x >> 24;
  }
  // Looked up in another random order than inserted.
  std::vector<uint64_t> lookups = ids;
  for (size_t i = lookups.size(); i > 1; --i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(lookups[i - 1], lookups[(x >> 33) % i]);
  }
  std::printf("row index, %lld random ids:\n%-28s %10s %10s %12s\n",
              static_cast<long long>(n), "map", "insert ns", "find ns",
              "bytes/entry");
  IndexRow<absl::flat_hash_map<uint64_t, uint32_t>>("absl::flat_hash_map", ids,
                                                    lookups);
  IndexRow<std::unordered_map<uint64_t, uint32_t>>("std::unordered_map", ids,
                                                   lookups);
  return 0;
}

}  // namespace paramd
