// PushFrames: a worker's pushes as gRPC messages, without copying the
// gradients. Built once from the plan: for each shard, the framing before
// every chunk it owns and the groups of chunks one message carries
// (GroupChunks over the bytes that travel). Per push, Build frames the
// gradient buffer itself (float32) or, under compression fp16, its halves
// (common/base/half.h; the first push with values beyond half's range logs how
// many were sent as ±65504), or under compression topk each chunk's
// selected (index, value) pairs (worker/topk.h). A retry of the last push
// (Build again at the same clock) sends the same selection: the error
// feedback residual moves once per clock.
#ifndef PARAMD_WORKER_RPC_PUSH_FRAMES_H_
#define PARAMD_WORKER_RPC_PUSH_FRAMES_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/rpc/grpc_frames.h"
#include "common/wire/shared_segment.h"
#include "common/wire/wire_format.h"
#include "worker/topk.h"

namespace paramd {

class PushFrames {
 public:
  // `plan` and `layout` must outlive this.
  PushFrames(const JobConfig& config, const PartitionPlan& plan,
             const FlatLayout& layout, int rank);

  // Each shard's messages for the flat `gradients` computed at `clock`
  // (one: a unary Push; several, each but the last with
  // PushRequest.more: a StepStream step or a PushStream). The first asks
  // for a StepStream reply in messages of kStreamMessageBytes, or with
  // worker.slice_bytes for a step in slices (PushRequest.slices). The
  // messages keep the bytes they reference alive until gRPC releases
  // them.
  // A shard with a shared-memory segment (`segments[shard]`, when given and
  // not null) gets one message whose chunks' bytes are copied into the
  // segment's push area (dense float32 or fp16; top-k sends the bytes).
  std::vector<std::vector<grpc::ByteBuffer>> Build(
      uint64_t clock, float loss,
      std::shared_ptr<const std::vector<float>> gradients,
      absl::Span<SharedSegment* const> segments = {});

  // One message of shard `shard`'s push at `clock`, for a StepStream step
  // whose push is sent piece by piece (worker.overlap): the push header
  // when `first` (asking for the reply a chunk per message), then the
  // shard's owned chunks `owned` (indices into plan.ChunksOfShard(shard)),
  // read from the flat buffer `flat` — float32, or under fp16 halves made
  // with Halve — that `owner` keeps alive; PushRequest.more unless `last`.
  // The first also carries the rows SetRows gave.
  grpc::ByteBuffer Piece(uint64_t clock, float loss, int shard, bool first,
                         bool last, absl::Span<const size_t> owned,
                         const void* flat,
                         std::shared_ptr<const void> owner) const;
  // Whether pushes travel as float16 (compression fp16).
  bool fp16() const { return fp16_; }
  // float32 -> float16 for a push (the first values beyond half's range
  // are logged once).
  void Halve(absl::Span<const float> from, absl::Span<uint16_t> to);

  // Row gradients of embedding table `table` (dim floats per id; ids
  // sorted and distinct) that every push from now on carries, each row to
  // the shard that owns it (common/model/rows.h), until replaced: a retried
  // push resends them. As float16 under compression fp16.
  void SetRows(uint32_t table, int dim, absl::Span<const uint64_t> ids,
               absl::Span<const float> grads);
  // No rows from now on (a push that gRPC still sends keeps its own).
  void ClearRows() { rows_ = nullptr; }

 private:
  std::vector<std::vector<grpc::ByteBuffer>> BuildTopK(
      uint64_t clock, float loss, const std::vector<float>& gradients);
  // Each shard's messages, one per group of its chunks (Message), but for
  // the shards with a segment in `skip` (left empty); `owner` keeps the
  // referenced bytes alive.
  std::vector<std::vector<grpc::ByteBuffer>> Frame(
      uint64_t clock, float loss, std::shared_ptr<const void> owner,
      const std::function<void(FrameBuilder&, int)>& add_chunk,
      absl::Span<SharedSegment* const> skip = {}) const;
  // One message of shard `shard`: when `first` the push header and the
  // shard's rows, then for each of its owned chunks `owned` (indices into
  // plan.ChunksOfShard(shard)) the chunk's framing and what
  // `add_chunk(frame, global chunk)` adds; with `more`, PushRequest.more
  // (another message of the push follows). The header asks for the reply
  // in messages of `reply_message_bytes`.
  grpc::ByteBuffer Message(
      uint64_t clock, float loss, int shard, bool first,
      absl::Span<const size_t> owned, std::shared_ptr<const void> owner,
      const std::function<void(FrameBuilder&, int)>& add_chunk,
      bool more = false,
      uint32_t reply_message_bytes = kStreamMessageBytes) const;
  // add_chunk for dense chunks read from the flat buffer `flat` (float32,
  // or halves under fp16).
  std::function<void(FrameBuilder&, int)> DenseChunk(const void* flat) const;
  // Shard `shard`'s push in one message whose chunks' bytes (from `flat`,
  // as DenseChunk reads them) are copied into `segment`'s push area.
  grpc::ByteBuffer InSegment(uint64_t clock, float loss, int shard,
                             const void* flat, SharedSegment* segment,
                             std::shared_ptr<const void> owner) const;

  // One table's rows bound for one shard, as they travel.
  struct ShardRows {
    std::vector<uint64_t> ids;
    std::vector<float> values;
    std::vector<uint16_t> halves;  // fp16
  };
  // By table (each shared, never changed once set), then shard.
  using Rows = std::vector<std::shared_ptr<const std::vector<ShardRows>>>;

  // Adds shard `shard`'s row blocks (after the push header).
  void AddRows(FrameBuilder& frame, size_t shard) const;

  struct ShardFrames {
    // The framing before each owned chunk (never changes; top-k sends the
    // same number of entries every step).
    std::vector<std::string> chunk_headers;
    // Owned chunks [begin, end) sent together in one message.
    std::vector<std::pair<size_t, size_t>> groups;
  };

  const std::string job_id_;
  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const int rank_;
  const bool fp16_;
  // PushRequest.pull_dtype: what a PushPull's reply carries (0: float32).
  const int pull_dtype_;
  // worker.slice_bytes where the servers take slices (ServersTakeSlices):
  // a shard's push in messages of about this many bytes, the first asking
  // for PushRequest.slices; 0: in messages of kStreamMessageBytes.
  const int64_t slice_bytes_;
  std::vector<ShardFrames> shards_;
  // SetRows's rows; replaced, not changed, while gRPC may hold them.
  std::shared_ptr<Rows> rows_;
  bool warned_saturation_ = false;  // fp16: logged once.
  // topk: the compressor and the last clock's selection (by global chunk).
  std::unique_ptr<TopKCompressor> topk_;
  std::vector<std::string> topk_data_tags_;  // By global chunk.
  uint64_t topk_clock_ = 0;
  std::shared_ptr<const std::vector<TopKCompressor::Chunk>> topk_last_;
};

// The version in a PushResponse (DataLoss when it does not parse).
absl::StatusOr<uint64_t> PushedVersion(const grpc::ByteBuffer& buffer);

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_PUSH_FRAMES_H_
