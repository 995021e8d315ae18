// RowCalls: a worker's pulls of embedding-table rows. One PullRows goes to
// each shard that owns some of the ids (common/model/rows.h), all at once;
// each reply's rows (float32, or fp16 under compression.pull: fp16) are
// copied to their places in the caller's output. The row gradients of a
// step ride on its pushes (PushFrames::SetRows), not here.
//
// Thread-compatible: one training loop uses it at a time.
#ifndef PARAMD_WORKER_RPC_ROW_CALLS_H_
#define PARAMD_WORKER_RPC_ROW_CALLS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "worker/parameter_client.h"
#include "worker/rpc/shard_links.h"

namespace paramd {

class RowCalls {
 public:
  // `setup`'s config and `links` outlive this.
  RowCalls(const ClientSetup& setup, ShardLinks* links);

  // One attempt at ParameterClient::PullRows: rows `ids` of `table` at
  // `clock` into `out` (ids.size() × the table's dim floats).
  absl::Status Pull(uint64_t clock, uint32_t table,
                    absl::Span<const uint64_t> ids, absl::Span<float> out);

 private:
  const JobConfig& config_;
  const int rank_;
  const bool pull_half_;  // compression.pull: fp16
  ShardLinks* const links_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_ROW_CALLS_H_
