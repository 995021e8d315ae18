#include "common/model/partitioner.h"

#include <algorithm>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

// See the header: how finely tensors are cut for balance.
constexpr int64_t kPiecesPerShare = 8;
constexpr int64_t kMinSplitBytes = 16 << 10;

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ULL;
  }
  return h;
}

template <typename T>
uint64_t Fnv1a(uint64_t h, T value) {
  return Fnv1a(h, &value, sizeof(value));
}

// Each chunk onto a shard: the longest first, each onto the least loaded
// shard so far (ties: the lowest id).
void PlaceChunks(int num_shards, std::vector<ChunkSpec>* chunks) {
  std::vector<int> order(chunks->size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return (*chunks)[a].length > (*chunks)[b].length;
  });
  std::vector<int64_t> load(num_shards, 0);
  for (int i : order) {
    const int shard = static_cast<int>(
        std::min_element(load.begin(), load.end()) - load.begin());
    (*chunks)[i].shard = shard;
    load[shard] += (*chunks)[i].length * kElementBytes;
  }
}

}  // namespace

absl::StatusOr<PartitionPlan> PartitionPlan::Build(const ModelSpec& spec,
                                                   int64_t chunk_bytes,
                                                   int num_shards) {
  if (num_shards < 1) {
    return absl::InvalidArgumentError("partition needs at least one shard");
  }
  if (chunk_bytes < kElementBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes ", chunk_bytes, " holds no element"));
  }
  int64_t effective_bytes = chunk_bytes;
  if (num_shards > 1) {
    const int64_t fair_share = spec.total_elements * kElementBytes / num_shards;
    effective_bytes = std::min(
        chunk_bytes, std::max(kMinSplitBytes, fair_share / kPiecesPerShare));
  }
  const int64_t chunk_elems = effective_bytes / kElementBytes;
  PartitionPlan plan;
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int t = 0; t < static_cast<int>(spec.tensors.size()); ++t) {
    const TensorSpec& tensor = spec.tensors[t];
    if (tensor.num_elements < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", tensor.name, " has no elements"));
    }
    plan.first_chunk_of_tensor_.push_back(
        static_cast<int>(plan.chunks_.size()));
    // Equal chunks (the last may be shorter), none over chunk_bytes.
    const int64_t n_chunks =
        (tensor.num_elements + chunk_elems - 1) / chunk_elems;
    const int64_t per_chunk = (tensor.num_elements + n_chunks - 1) / n_chunks;
    for (int64_t c = 0, off = 0; off < tensor.num_elements; ++c) {
      const int64_t len = std::min(per_chunk, tensor.num_elements - off);
      plan.chunks_.push_back({t, static_cast<int>(c), off, len, 0});
      off += len;
    }
    h = Fnv1a(h, tensor.name.data(), tensor.name.size());
    h = Fnv1a(h, tensor.num_elements);
    // A statistic is applied otherwise (plans of trainable tensors only
    // keep the fingerprints they had).
    if (tensor.kind == TensorKind::kStatistic) h = Fnv1a(h, int64_t{1});
  }
  plan.first_chunk_of_tensor_.push_back(static_cast<int>(plan.chunks_.size()));

  PlaceChunks(num_shards, &plan.chunks_);
  plan.by_shard_.assign(num_shards, {});
  for (int i = 0; i < static_cast<int>(plan.chunks_.size()); ++i) {
    const ChunkSpec& c = plan.chunks_[i];
    plan.by_shard_[c.shard].push_back(i);
    h = Fnv1a(h, c.offset);
    h = Fnv1a(h, c.length);
    h = Fnv1a(h, c.shard);
  }
  // Processes that disagree on a table would place or size its rows
  // differently.
  for (const TableSpec& t : spec.tables) {
    h = Fnv1a(h, t.name.data(), t.name.size());
    h = Fnv1a(h, static_cast<int64_t>(t.rows));
    h = Fnv1a(h, t.dim);
  }
  plan.fingerprint_ = Fnv1a(h, num_shards);
  return plan;
}

int PartitionPlan::Find(int64_t tensor_id, int64_t chunk_index) const {
  // Ids come from the wire: compared in 64 bits, so no sum overflows.
  const int64_t tensors =
      static_cast<int64_t>(first_chunk_of_tensor_.size()) - 1;
  if (tensor_id < 0 || tensor_id >= tensors) return -1;
  const int64_t first = first_chunk_of_tensor_[tensor_id];
  const int64_t end = first_chunk_of_tensor_[tensor_id + 1];
  if (chunk_index < 0 || chunk_index >= end - first) return -1;
  return static_cast<int>(first + chunk_index);
}

int64_t PartitionPlan::BytesOnShard(int shard) const {
  int64_t bytes = 0;
  for (int i : by_shard_[shard]) bytes += chunks_[i].length * kElementBytes;
  return bytes;
}

}  // namespace paramd
