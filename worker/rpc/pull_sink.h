// PullSink: one shard's pulled chunks, collected into the flat parameters
// message by message as they arrive (a unary reply or each message of a
// PullStream). Every chunk must be one the plan gives the shard, come once,
// and have the dtype and size asked for (float32, or float16 under
// compression.pull: fp16, widened in place); every message must carry the
// same version.
//
// Thread-compatible: one call's completions use it.
#ifndef PARAMD_WORKER_RPC_PULL_SINK_H_
#define PARAMD_WORKER_RPC_PULL_SINK_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"

namespace paramd {

class PullSink {
 public:
  // `plan` and `layout` outlive the sink; `params` is the flat model.
  PullSink(const PartitionPlan& plan, const FlatLayout& layout, int shard,
           bool half, absl::Span<float> params);
  absl::Status Consume(const grpc::ByteBuffer& message);
  // The stream's shared-memory pull area, where a reply's chunks may lie
  // (common/wire/shared_segment.h); empty: none.
  void SetPullArea(absl::string_view area) { pull_area_ = area; }
  // Notes when the first message comes (first_message), for the step
  // timeline.
  void TimeFirstMessage() { timed_ = true; }
  absl::Time first_message() const { return first_; }
  // Whether global chunk `global` has arrived (and, under float16, been
  // widened into place).
  bool Has(int global) const { return seen_[global] && pending_ != global; }
  // Whether a message came and every chunk the shard owns arrived (a
  // reply in several messages is then whole).
  bool complete() const {
    return messages_ > 0 && chunks_ == plan_.ChunksOfShard(shard_).size();
  }
  // The version served, once every chunk the shard owns arrived.
  absl::StatusOr<uint64_t> Finish() const;

 private:
  // Widens the float16 chunk last copied into halves_ into params_.
  void WidenPending();

  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  int shard_;
  bool half_;
  absl::Span<float> params_;
  absl::string_view pull_area_;
  std::vector<uint16_t> halves_;  // compression.pull fp16: one chunk.
  int pending_ = -1;              // Its global index; -1: none.
  std::vector<char> seen_;        // By global chunk index.
  size_t chunks_ = 0;
  size_t messages_ = 0;
  uint64_t version_ = 0;
  bool timed_ = false;
  absl::Time first_ = absl::InfinitePast();
};

// The version a pull from every shard served: the smallest of the sinks'
// (each finished).
absl::StatusOr<uint64_t> PulledVersion(const std::vector<PullSink>& sinks);

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_PULL_SINK_H_
