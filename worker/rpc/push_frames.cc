#include "worker/rpc/push_frames.h"

#include "common/half.h"
#include "common/rpc/grpc_frames.h"
#include "common/wire_format.h"
#include "proto/paramd.pb.h"
#include "spdlog/spdlog.h"

namespace paramd {

PushFrames::PushFrames(const JobConfig& config, const PartitionPlan& plan,
                       const FlatLayout& layout, int rank)
    : job_id_(config.job_id),
      plan_(plan),
      layout_(layout),
      rank_(rank),
      fp16_(config.compression.fp16()) {
  const int64_t element_bytes = fp16_ ? 2 : kElementBytes;
  for (int s = 0; s < plan_.num_shards(); ++s) {
    ShardFrames frames;
    std::vector<int64_t> chunk_bytes;
    for (int global : plan_.ChunksOfShard(s)) {
      const ChunkSpec& c = plan_.chunks()[global];
      const int64_t bytes = c.length * element_bytes;
      frames.chunk_headers.push_back(EncodeChunkHeader(
          kPushChunksField, static_cast<uint32_t>(c.tensor_id),
          static_cast<uint32_t>(c.chunk_index),
          fp16_ ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32,
          static_cast<size_t>(bytes)));
      chunk_bytes.push_back(bytes);
    }
    frames.groups = GroupChunks(chunk_bytes);
    shards_.push_back(std::move(frames));
  }
}

std::vector<std::vector<grpc::ByteBuffer>> PushFrames::Build(
    uint64_t clock, float loss,
    std::shared_ptr<const std::vector<float>> gradients) {
  // The bytes that travel: the float32 buffer itself, or its halves.
  const char* flat = reinterpret_cast<const char*>(gradients->data());
  int64_t element_bytes = kElementBytes;
  std::shared_ptr<const void> owner = gradients;
  if (fp16_) {
    auto halves = std::make_shared<std::vector<uint16_t>>(gradients->size());
    const int64_t saturated =
        FloatsToHalves(*gradients, absl::MakeSpan(*halves));
    if (saturated > 0 && !warned_saturation_) {
      warned_saturation_ = true;
      spdlog::warn(
          "rank {}: {} gradient element(s) beyond float16's range were sent "
          "as ±65504 (compression fp16; logged once)",
          rank_, saturated);
    }
    flat = reinterpret_cast<const char*>(halves->data());
    element_bytes = 2;
    owner = std::move(halves);
  }
  const std::string header =
      EncodePushHeader(job_id_, static_cast<uint32_t>(rank_), clock, loss);
  std::vector<std::vector<grpc::ByteBuffer>> messages(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    const std::vector<int>& owned = plan_.ChunksOfShard(static_cast<int>(i));
    for (const auto& [begin, end] : shards_[i].groups) {
      FrameBuilder frame(owner);
      if (begin == 0) frame.AddCopy(header);
      for (size_t k = begin; k < end; ++k) {
        const ChunkSpec& c = plan_.chunks()[owned[k]];
        frame.AddCopy(shards_[i].chunk_headers[k]);
        frame.AddReference(
            absl::string_view(flat + FlatOffset(layout_, c) * element_bytes,
                              static_cast<size_t>(c.length * element_bytes)));
      }
      messages[i].push_back(frame.Finish());
    }
  }
  return messages;
}

}  // namespace paramd
