// The partition plan: every tensor cut into chunks of at most chunk_bytes,
// each chunk placed on one shard.
//
// Chunks are at most chunk_bytes, and with several shards also at most an
// eighth of a shard's fair share (but not under 16 KiB): LPT can only
// balance as finely as its pieces, and a chunk half a shard's size leaves
// shards up to ~14% apart. The finer cut keeps them within a few percent.
//
// Placement is longest-processing-time greedy: chunks in decreasing size
// (ties by tensor, then chunk index) each go to the shard holding the fewest
// bytes so far (ties to the lowest shard). It is a pure function of the
// model spec, chunk_bytes and the shard count, so every process computes the
// same plan from the same job file and no lookup service is needed. Large
// tensors spread over all shards; small ones stay whole.
//
// A plan is immutable after Build and safe to share between threads.
#ifndef PARAMD_COMMON_MODEL_PARTITIONER_H_
#define PARAMD_COMMON_MODEL_PARTITIONER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_spec.h"

namespace paramd {

constexpr int64_t kElementBytes = 4;  // float32

struct ChunkSpec {
  int tensor_id = 0;
  int chunk_index = 0;
  int64_t offset = 0;  // First element within the tensor.
  int64_t length = 0;  // Elements.
  int shard = 0;
};

// Where chunk `c` starts in a flat buffer of every tensor laid out by
// `layout` (a worker's parameters or gradients), in elements.
inline int64_t FlatOffset(const FlatLayout& layout, const ChunkSpec& c) {
  return layout.offset[c.tensor_id] + c.offset;
}

class PartitionPlan {
 public:
  static absl::StatusOr<PartitionPlan> Build(const ModelSpec& spec,
                                             int64_t chunk_bytes,
                                             int num_shards);

  // All chunks, ordered by (tensor_id, chunk_index).
  const std::vector<ChunkSpec>& chunks() const { return chunks_; }
  // Indices into chunks() of the chunks `shard` owns, in chunks() order.
  const std::vector<int>& ChunksOfShard(int shard) const {
    return by_shard_[shard];
  }
  // Index into chunks() of (tensor_id, chunk_index), or -1 for any pair
  // outside the plan (ids from the wire, unchecked: every value is safe).
  int Find(int64_t tensor_id, int64_t chunk_index) const;
  int64_t BytesOnShard(int shard) const;
  int num_shards() const { return static_cast<int>(by_shard_.size()); }
  // A hash of the whole plan, to check that two processes agree on it.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::vector<ChunkSpec> chunks_;
  std::vector<std::vector<int>> by_shard_;
  std::vector<int> first_chunk_of_tensor_;
  uint64_t fingerprint_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_MODEL_PARTITIONER_H_
