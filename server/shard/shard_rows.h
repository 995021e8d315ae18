// ShardRows: one shard's embedding-table rows as requests meet them — a
// push's row blocks checked and widened to float32 gradients, a PullRows'
// ids checked and its rows read into a reply, and the tables' figures for
// the status RPC. Ids must follow RowBlock's rules (sorted, distinct, in
// range, owned by this shard: common/model/rows.h); every refusal names the
// request, the table, the rule and the id. The rows themselves live in the
// store's RowTables; this class keeps no state of its own. Thread-safe.
#ifndef PARAMD_SERVER_SHARD_SHARD_ROWS_H_
#define PARAMD_SERVER_SHARD_SHARD_ROWS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "server/store/shard_store.h"

namespace paramd {

// The rows of one table a PullRows serves.
struct RowsReply {
  uint64_t version = 0;
  int dtype = 0;                 // proto::DType of the values.
  std::vector<float> values;     // float32: dim per id.
  std::vector<uint16_t> halves;  // float16: dim per id.
  absl::string_view bytes() const;
};

// A push's row blocks, checked and widened to float32.
struct PushRows {
  std::vector<std::vector<uint64_t>> ids;
  std::vector<std::vector<float>> values;
  std::vector<RowGrads> grads;  // Referencing ids and values.
  uint64_t wire_bytes = 0, float32_bytes = 0;
};

class ShardRows {
 public:
  // A PullRows reply, or a push's row blocks, may hold this many bytes.
  static constexpr int64_t kMaxMessageBytes = int64_t{64} << 20;

  // `store` must outlive this object.
  ShardRows(int num_shards, int shard_id, const ShardStore* store);

  // The tables of shard `shard_id` (by model.embeddings index), those with
  // storage on disk under storage.dir/shard-K/NAME (emptied first).
  static absl::StatusOr<std::vector<std::unique_ptr<RowTable>>> MakeTables(
      const JobConfig& config, int shard_id);

  // The push's row blocks: one per table at most, float32 or float16, of
  // ids × dim finite values.
  absl::Status CheckPush(const PushView& request, PushRows* out) const;
  // `ids` of `table` for `rpc` ("Push", "PullRows"), decoded and checked.
  absl::Status CheckIds(const char* rpc, uint32_t table, absl::string_view ids,
                        std::vector<uint64_t>* out) const;
  // RESOURCE_EXHAUSTED when `count` rows of `table` in `dtype` would make a
  // reply over kMaxMessageBytes.
  absl::Status CheckReplySize(uint32_t table, size_t count, int dtype) const;
  // Reads `ids` of `table` (each its initial value if never pushed) into
  // `reply` as `dtype` at `version`, and counts them pulled.
  void Read(uint32_t table, absl::Span<const uint64_t> ids, int dtype,
            uint64_t version, RowsReply* reply) const;
  // Each table's rows, limit, memory and traffic.
  void FillStatus(proto::ShardStatus* status) const;

 private:
  const int num_shards_;
  const int shard_id_;
  const ShardStore* const store_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_ROWS_H_
