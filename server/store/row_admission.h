// RowAdmission: which ids not held yet a table stores as rows
// (model.embeddings[i].admission). A click log's ids are mostly seen once;
// storing each would grow the table without bound, so an id becomes a row
// only once it was in `min_count` of the table's updates, or, by chance,
// with `probability` at each update it is in.
//
// Counts live in a count-min sketch of four rows of one-byte saturating
// counters (sketch_mib in all), updated conservatively (only the smallest
// of an id's four counters grow), so a count is never below the true one:
// collisions admit an id early, never late. Chance is a hash of (seed,
// table, id, the table's step), so every replay and replica draws alike.
// Neither is checkpointed: after a restore, ids not held count from 0.
//
// Not thread-safe: RowTable calls it under its own lock.
#ifndef PARAMD_SERVER_STORE_ROW_ADMISSION_H_
#define PARAMD_SERVER_STORE_ROW_ADMISSION_H_

#include <cstdint>
#include <vector>

#include "common/config/job_config.h"

namespace paramd {

class RowAdmission {
 public:
  static constexpr int kDepth = 4;

  RowAdmission(const AdmissionConfig& config, uint32_t table, uint64_t seed);

  // Whether `id` (not held) becomes a row at the table's update `step`;
  // under min_count, counts this update towards it.
  bool Admit(uint64_t id, int64_t step);
  // The sketch's estimate of the updates `id` was in (min_count only).
  int Count(uint64_t id) const;
  // Memory held by the sketch.
  uint64_t bytes() const { return counts_.size(); }

 private:
  // The counter of `id` in sketch row `d`.
  size_t Cell(uint64_t id, int d) const;

  const AdmissionConfig config_;
  const uint64_t key_;  // seed and table, mixed.
  size_t width_ = 0;    // Counters per sketch row.
  std::vector<uint8_t> counts_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_ADMISSION_H_
