// Eviction of a table's rows (model.embeddings[i].eviction): which rows a
// sweep drops, and the thread that runs the sweeps beside the pushes.
//
// Each stored row keeps its id, the table update it was last pushed in
// and how many updates it was in (RowMeta, by slot, in RowTable). A sweep
// (RowTable::Sweep) drops, in this order:
//   - with ttl_steps: every row not pushed in the table's last ttl_steps
//     updates (the update's clock minus the row's last >= ttl_steps);
//   - with capacity_rows, when more rows than that are left: the rows
//     first in EvictionKey's order (lru: least recently pushed, lfu: least
//     often, then least recently; ties by id) until CapacityTarget rows
//     are left, a sixteenth below the capacity, so that a table at its
//     capacity is not swept at every push.
// A table asks for a sweep (SweepDue) when its rows pass the capacity, or
// every eighth of ttl_steps updates: a row lives at most ttl_steps +
// ttl_steps / 8 updates unpushed, and a shard holds more than its capacity
// only for what arrives before the evictor has run.
#ifndef PARAMD_SERVER_STORE_ROW_EVICTION_H_
#define PARAMD_SERVER_STORE_ROW_EVICTION_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/table_config.h"

namespace paramd {

class RowTable;

// What a stored row keeps for eviction.
struct RowMeta {
  uint64_t id = 0;
  int64_t last = 0;    // The table update (RowTable's clock) last pushed in.
  uint32_t count = 0;  // Updates pushed in (saturating).
  // A table with storage (row_table.h): what its spill holds of the row.
  enum Disk : uint8_t { kNone = 0, kOlder = 1, kSame = 2 };
  uint8_t disk = kNone;
};

// Whether a table at update `clock`, last swept at `last_sweep`, holding
// `rows`, should be swept.
bool SweepDue(const EvictionConfig& config, int64_t clock, int64_t last_sweep,
              uint64_t rows);
// Whether `row` has outlived ttl_steps at update `clock`.
bool Expired(const EvictionConfig& config, int64_t clock, const RowMeta& row);
// The row's place in the capacity's order: smaller leaves first (then the
// smaller id).
uint64_t EvictionKey(const EvictionConfig& config, const RowMeta& row);
// The rows a capacity sweep leaves.
uint64_t CapacityTarget(uint64_t capacity_rows);

// A row a sweep may drop: its key at the scan (EvictionKey, or its last
// update when it expired) and id.
struct RowVictim {
  uint64_t key;
  uint64_t id;
  bool expired;
};

// The `most` rows first in a capacity's order (smaller key, then smaller
// id) among those offered, kept in a heap of at most `most` (the largest
// on top): a sweep of a table of millions of rows holds the keys of the
// rows it may drop, not every row's.
class LeastRows {
 public:
  explicit LeastRows(size_t most) : most_(most) { kept_.reserve(most); }
  void Offer(const RowVictim& row);
  // The first `k` of the rows kept (all of them when fewer), in no order.
  std::vector<RowVictim> Take(size_t k) &&;

 private:
  static bool First(const RowVictim& a, const RowVictim& b) {
    return a.key != b.key ? a.key < b.key : a.id < b.id;
  }
  const size_t most_;
  std::vector<RowVictim> kept_;
};

// One thread that sweeps the tables that ask for it, woken by the pushes
// (ShardStore calls Wake after a step whose tables are due). Sweeps take
// the table's lock in short pieces (RowTable::Sweep), never a push's.
class RowEvictor {
 public:
  explicit RowEvictor(std::vector<RowTable*> tables);
  ~RowEvictor();  // Finishes the sweep under way, then stops.
  RowEvictor(const RowEvictor&) = delete;
  RowEvictor& operator=(const RowEvictor&) = delete;

  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // Sweeps run so far.
  uint64_t sweeps() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `n` sweeps ran or `timeout` passed; whether they ran.
  bool AwaitSweeps(uint64_t n, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();

  const std::vector<RowTable*> tables_;
  mutable absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sweeps_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_EVICTION_H_
