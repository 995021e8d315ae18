#include "server/shard_store.h"

namespace paramd {

ShardStore::ShardStore(const ModelSpec& spec, const PartitionPlan& plan,
                       int shard, uint64_t seed,
                       std::unique_ptr<Optimizer> optimizer)
    : optimizer_(std::move(optimizer)),
      local_of_global_(plan.chunks().size(), -1) {
  absl::MutexLock lock(&mu_);
  for (int global : plan.ChunksOfShard(shard)) {
    const ChunkSpec& c = plan.chunks()[global];
    local_of_global_[global] = static_cast<int>(specs_.size());
    specs_.push_back(c);
    std::vector<float> values(c.length);
    InitTensorRange(spec.tensors[c.tensor_id], seed, c.tensor_id, c.offset,
                    absl::MakeSpan(values));
    params_.push_back(std::move(values));
    slots_.emplace_back(optimizer_->num_slots(),
                        std::vector<float>(c.length, 0.0f));
    bytes_ += c.length * kElementBytes;
  }
}

int ShardStore::LocalIndex(int global) const {
  if (global < 0 || global >= static_cast<int>(local_of_global_.size())) {
    return -1;
  }
  return local_of_global_[global];
}

void ShardStore::ApplyStep(absl::Span<const absl::Span<const float>> grads,
                           float scale) {
  absl::MutexLock lock(&mu_);
  const int64_t step = static_cast<int64_t>(version_) + 1;
  for (size_t i = 0; i < params_.size(); ++i) {
    optimizer_->Apply(absl::MakeSpan(params_[i]), grads[i], scale,
                      absl::MakeSpan(slots_[i]), step);
  }
  ++version_;
}

uint64_t ShardStore::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return version_;
}

void ShardStore::Read(
    const std::function<void(uint64_t,
                             absl::Span<const std::vector<float>>)>& read)
    const {
  absl::ReaderMutexLock lock(&mu_);
  read(version_, params_);
}

}  // namespace paramd
