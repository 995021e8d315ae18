// An embedding table's configuration (model.embeddings[i]; docs/
// job-file.md, docs/sparse-tables.md). Plain structs.
#ifndef PARAMD_COMMON_CONFIG_TABLE_CONFIG_H_
#define PARAMD_COMMON_CONFIG_TABLE_CONFIG_H_

#include <cstdint>
#include <string>

#include "common/config/schedule_config.h"

namespace paramd {

// Which new rows a table stores (model.embeddings[i].admission): an id
// not held yet becomes a row once it was in `min_count` updates (counted
// in a fixed-size sketch, not by storing it), or with `probability` at
// each update it is in. Until then its reads give its initial values and
// its gradients are dropped. Neither set: every touched id is stored.
struct AdmissionConfig {
  int min_count = 0;       // In [2, 255]; 0: not by count.
  double probability = 0;  // In (0, 1); 0: not by chance.
  int sketch_mib = 8;      // min_count's count-min sketch, per shard.
  bool enabled() const { return min_count > 0 || probability > 0; }
};

// Which stored rows a table drops (model.embeddings[i].eviction): those
// not pushed in the table's last `ttl_steps` updates, and/or, past
// `capacity_rows` rows on a shard, the least recently (lru) or least
// often (lfu) pushed. An evicted row that comes back starts again from
// its initial values. Sweeps run beside the pushes (server/store/
// row_evictor.h). Neither set: rows stay for good.
struct EvictionConfig {
  int64_t ttl_steps = 0;       // 0: no time to live.
  uint64_t capacity_rows = 0;  // Per shard; 0: no capacity.
  bool lfu = false;            // policy: lru (false) or lfu.
  bool enabled() const { return ttl_steps > 0 || capacity_rows > 0; }
};

// Where a table's rows live (model.embeddings[i].storage): with a `dir`,
// each shard keeps at most `memory_bytes` of rows in memory (values,
// optimizer slots, index and per-row bookkeeping) and the rest in RocksDB
// under dir/shard-K/NAME, the least recently pushed moved out beside the
// pushes and read back when touched (server/store/row_table.h,
// docs/sparse-tables.md "Rows beyond memory"). No dir: every row in memory.
struct StorageConfig {
  uint64_t memory_bytes = 0;  // >= 64 KiB with a dir.
  std::string dir;
  bool enabled() const { return !dir.empty(); }
};

// One embedding table (model.embeddings): `rows` virtual rows of `dim`
// floats, sharded by row (common/model/rows.h). Only rows ever pushed take
// memory; a row starts at InitRow's values.
struct EmbeddingTableConfig {
  std::string name;
  uint64_t rows = 0;  // Ids are in [0, rows); at most 2^40.
  int dim = 0;
  std::string init = "normal";  // normal (std init_scale), uniform (±), zeros
  double init_scale = 0.01;
  // sgd (no momentum), adagrad or adam: lazy Adam, whose moments of rows
  // not pushed in a step do not move (docs/job-file.md).
  std::string optimizer = "adam";
  double learning_rate = 0.01;
  double beta1 = 0.9, beta2 = 0.999;  // adam
  double eps = 0;                     // adam 1e-8, adagrad 1e-10 when 0
  // Over the table's steps on its shard (one per applied update).
  ScheduleConfig schedule;
  // The rows one shard may hold; a push that would create more is refused
  // with RESOURCE_EXHAUSTED naming the table and shard. 0: no limit.
  uint64_t max_rows = 0;
  AdmissionConfig admission;
  EvictionConfig eviction;
  StorageConfig storage;
  // model.embeddings[i].policy. "async": each push's gradient of this
  // table's rows is applied as the push is accepted, by itself (under a
  // sync job not summed into the round's mean), and a read of the table
  // waits for the reader's own pushes only — while the job's policy still
  // holds its dense part. Allowed under a sync or ssp job; under an async
  // job every table is. Empty (or the job's policy by name): the job's.
  // docs/sparse-tables.md, "A policy per table".
  std::string policy;
  bool async() const { return policy == "async"; }
};

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_TABLE_CONFIG_H_
