// A shard whose job has one embedding table (emb: dim 4, SGD at 0.5),
// and the pushes and pulls of its rows the shard tests make.
#ifndef PARAMD_TESTS_ROW_PUSHES_H_
#define PARAMD_TESTS_ROW_PUSHES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/config/job_config.h"
#include "proto/paramd.pb.h"
#include "server/shard/shard.h"

namespace paramd::testing {

constexpr int kRowDim = 4;

// A job of `servers` servers and 2 workers under `policy` whose model is
// an embedding_bag over table emb (`rows` rows, max_rows as given, and the
// table's further keys in `table_extra`, indented six spaces).
JobConfig RowsJob(const std::string& policy, int servers = 1,
                  const std::string& max_rows = "0",
                  const std::string& rows = "1000",
                  const std::string& table_extra = "");

// Shard `shard_id` of `config` with ranks 0 and 1 registered at clock 0.
std::unique_ptr<Shard> RegisteredShard(const JobConfig& config,
                                       int shard_id = 0);

// The gradient of `id` pushed by `rank`: distinct per (rank, id, element).
float RowGrad(uint32_t rank, uint64_t id, int element);

// A push from `rank` at `clock`: every chunk at zero, and rows `ids`
// (ascending) of table 0 with RowGrad's gradients.
proto::PushRequest RowPush(const Shard& shard, const JobConfig& config,
                           uint32_t rank, uint64_t clock,
                           const std::vector<uint64_t>& ids);

// PullRows of table 0's `ids` from `shard` as `rank` at `clock`.
absl::StatusOr<std::vector<float>> PullTableRows(
    Shard& shard, const JobConfig& config, uint32_t rank, uint64_t clock,
    const std::vector<uint64_t>& ids,
    absl::Time deadline = absl::Now() + absl::Seconds(30));

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_ROW_PUSHES_H_
