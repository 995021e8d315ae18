#include "worker/rpc/push_frames.h"

#include <cstring>

#include "common/base/half.h"
#include "common/model/rows.h"
#include "common/rpc/grpc_frames.h"
#include "common/wire/row_wire.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "spdlog/spdlog.h"

namespace paramd {

PushFrames::PushFrames(const JobConfig& config, const PartitionPlan& plan,
                       const FlatLayout& layout, int rank)
    : job_id_(config.job_id),
      plan_(plan),
      layout_(layout),
      rank_(rank),
      fp16_(config.compression.fp16()),
      pull_dtype_(config.compression.pull_fp16() ? proto::DTYPE_FLOAT16 : 0),
      slice_bytes_(ServersTakeSlices(config) ? config.worker.slice_bytes : 0) {
  const CompressionConfig& compression = config.compression;
  if (compression.topk()) {
    std::vector<std::pair<int64_t, int64_t>> chunks;
    for (const ChunkSpec& c : plan_.chunks()) {
      chunks.emplace_back(FlatOffset(layout_, c), c.length);
    }
    topk_ = std::make_unique<TopKCompressor>(
        std::move(chunks), compression.ratio, compression.error_feedback,
        static_cast<float>(compression.momentum));
    for (const ChunkSpec& c : plan_.chunks()) {
      topk_data_tags_.push_back(EncodeChunkDataTag(
          static_cast<size_t>(TopKCount(c.length, compression.ratio)) *
          sizeof(float)));
    }
  }
  const int64_t element_bytes = fp16_ ? 2 : kElementBytes;
  for (int s = 0; s < plan_.num_shards(); ++s) {
    ShardFrames frames;
    std::vector<int64_t> chunk_bytes;
    for (int global : plan_.ChunksOfShard(s)) {
      const ChunkSpec& c = plan_.chunks()[global];
      const auto tensor_id = static_cast<uint32_t>(c.tensor_id);
      const auto chunk_index = static_cast<uint32_t>(c.chunk_index);
      if (topk_ != nullptr) {
        const auto k =
            static_cast<size_t>(TopKCount(c.length, compression.ratio));
        frames.chunk_headers.push_back(EncodeSparseChunkHeader(
            kPushChunksField, tensor_id, chunk_index, proto::DTYPE_FLOAT32,
            k * sizeof(uint32_t), k * sizeof(float)));
        chunk_bytes.push_back(static_cast<int64_t>(k * 8));
        continue;
      }
      const int64_t bytes = c.length * element_bytes;
      frames.chunk_headers.push_back(
          EncodeChunkHeader(kPushChunksField, tensor_id, chunk_index,
                            fp16_ ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32,
                            static_cast<size_t>(bytes)));
      chunk_bytes.push_back(bytes);
    }
    frames.groups = GroupChunks(
        chunk_bytes, slice_bytes_ > 0 ? slice_bytes_ : kStreamMessageBytes);
    // A shard without chunks still takes a push every step (its clock,
    // and its rows): a message of just the header.
    if (frames.groups.empty()) frames.groups.emplace_back(0, 0);
    shards_.push_back(std::move(frames));
  }
}

std::vector<std::vector<grpc::ByteBuffer>> PushFrames::Build(
    uint64_t clock, float loss,
    std::shared_ptr<const std::vector<float>> gradients,
    absl::Span<SharedSegment* const> segments) {
  if (topk_ != nullptr) return BuildTopK(clock, loss, *gradients);
  // The bytes that travel: the float32 buffer itself, or its halves.
  const void* flat = gradients->data();
  std::shared_ptr<const void> owner = gradients;
  if (fp16_) {
    auto halves = std::make_shared<std::vector<uint16_t>>(gradients->size());
    Halve(*gradients, absl::MakeSpan(*halves));
    flat = halves->data();
    owner = std::move(halves);
  }
  std::vector<std::vector<grpc::ByteBuffer>> messages =
      Frame(clock, loss, owner, DenseChunk(flat), segments);
  for (size_t i = 0; i < segments.size() && i < messages.size(); ++i) {
    if (segments[i] == nullptr) continue;
    messages[i].push_back(
        InSegment(clock, loss, static_cast<int>(i), flat, segments[i], owner));
  }
  return messages;
}

grpc::ByteBuffer PushFrames::InSegment(
    uint64_t clock, float loss, int shard, const void* flat,
    SharedSegment* segment, std::shared_ptr<const void> owner) const {
  if (rows_ != nullptr) {
    owner = std::make_shared<
        std::pair<std::shared_ptr<const void>, std::shared_ptr<const Rows>>>(
        std::move(owner), rows_);
  }
  FrameBuilder frame(std::move(owner));
  frame.AddCopy(EncodePushHeader(job_id_, static_cast<uint32_t>(rank_), clock,
                                 loss, pull_dtype_, kStreamMessageBytes,
                                 segment->name()));
  AddRows(frame, static_cast<size_t>(shard));
  const int64_t element_bytes = fp16_ ? 2 : kElementBytes;
  const char* bytes = static_cast<const char*>(flat);
  const absl::Span<char> area = segment->push_area();
  uint64_t offset = 0;
  for (int global : plan_.ChunksOfShard(shard)) {
    const ChunkSpec& c = plan_.chunks()[global];
    const size_t size = static_cast<size_t>(c.length * element_bytes);
    std::memcpy(area.data() + offset,
                bytes + FlatOffset(layout_, c) * element_bytes, size);
    frame.AddCopy(EncodeSegmentChunk(
        kPushChunksField, static_cast<uint32_t>(c.tensor_id),
        static_cast<uint32_t>(c.chunk_index),
        fp16_ ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32, offset, size));
    offset += (size + 3) / 4 * 4;
  }
  return frame.Finish();
}

std::function<void(FrameBuilder&, int)> PushFrames::DenseChunk(
    const void* flat) const {
  const int64_t element_bytes = fp16_ ? 2 : kElementBytes;
  const char* bytes = static_cast<const char*>(flat);
  return [this, bytes, element_bytes](FrameBuilder& frame, int global) {
    const ChunkSpec& c = plan_.chunks()[global];
    frame.AddReference(
        absl::string_view(bytes + FlatOffset(layout_, c) * element_bytes,
                          static_cast<size_t>(c.length * element_bytes)));
  };
}

void PushFrames::Halve(absl::Span<const float> from, absl::Span<uint16_t> to) {
  const int64_t saturated = FloatsToHalves(from, to);
  if (saturated > 0 && !warned_saturation_) {
    warned_saturation_ = true;
    spdlog::warn(
        "rank {}: {} gradient element(s) beyond float16's range were sent "
        "as ±65504 (compression fp16; logged once)",
        rank_, saturated);
  }
}

grpc::ByteBuffer PushFrames::Piece(uint64_t clock, float loss, int shard,
                                   bool first, bool last,
                                   absl::Span<const size_t> owned,
                                   const void* flat,
                                   std::shared_ptr<const void> owner) const {
  // The reply a chunk per message: the next forward pass starts on the
  // first chunks while the later ones are on the wire.
  return Message(clock, loss, shard, first, owned, std::move(owner),
                 DenseChunk(flat), /*more=*/!last, /*reply_message_bytes=*/1);
}

void PushFrames::SetRows(uint32_t table, int dim,
                         absl::Span<const uint64_t> ids,
                         absl::Span<const float> grads) {
  // gRPC may still send the rows of an earlier push: replace, not change
  // (other tables' rows are shared, not copied).
  auto rows = rows_ != nullptr ? std::make_shared<Rows>(*rows_)
                               : std::make_shared<Rows>();
  if (rows->size() <= table) rows->resize(table + 1);
  auto table_rows =
      std::make_shared<std::vector<ShardRows>>(shards_.size(), ShardRows());
  std::vector<ShardRows>& by_shard = *table_rows;
  const int shards = static_cast<int>(shards_.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ShardRows& to = by_shard[RowShard(table, ids[i], shards)];
    to.ids.push_back(ids[i]);
    to.values.insert(to.values.end(), grads.begin() + i * dim,
                     grads.begin() + (i + 1) * dim);
  }
  if (fp16_) {
    for (ShardRows& to : by_shard) {
      to.halves.resize(to.values.size());
      FloatsToHalves(to.values, absl::MakeSpan(to.halves));
    }
  }
  (*rows)[table] = std::move(table_rows);
  rows_ = std::move(rows);
}

std::vector<std::vector<grpc::ByteBuffer>> PushFrames::Frame(
    uint64_t clock, float loss, std::shared_ptr<const void> owner,
    const std::function<void(FrameBuilder&, int)>& add_chunk,
    absl::Span<SharedSegment* const> skip) const {
  std::vector<std::vector<grpc::ByteBuffer>> messages(shards_.size());
  std::vector<size_t> owned;
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (i < skip.size() && skip[i] != nullptr) continue;
    const auto& groups = shards_[i].groups;
    for (size_t g = 0; g < groups.size(); ++g) {
      owned.clear();
      for (size_t k = groups[g].first; k < groups[g].second; ++k) {
        owned.push_back(k);
      }
      messages[i].push_back(Message(clock, loss, static_cast<int>(i), g == 0,
                                    owned, owner, add_chunk,
                                    /*more=*/g + 1 < groups.size()));
    }
  }
  return messages;
}

grpc::ByteBuffer PushFrames::Message(
    uint64_t clock, float loss, int shard, bool first,
    absl::Span<const size_t> owned, std::shared_ptr<const void> owner,
    const std::function<void(FrameBuilder&, int)>& add_chunk, bool more,
    uint32_t reply_message_bytes) const {
  if (first && rows_ != nullptr) {
    // The frame keeps both the gradients and the rows alive.
    owner = std::make_shared<
        std::pair<std::shared_ptr<const void>, std::shared_ptr<const Rows>>>(
        std::move(owner), rows_);
  }
  FrameBuilder frame(std::move(owner));
  if (first) {
    frame.AddCopy(EncodePushHeader(job_id_, static_cast<uint32_t>(rank_), clock,
                                   loss, pull_dtype_, reply_message_bytes,
                                   /*segment=*/"", slice_bytes_ > 0));
    AddRows(frame, static_cast<size_t>(shard));
  }
  const std::vector<int>& chunks = plan_.ChunksOfShard(shard);
  for (size_t k : owned) {
    frame.AddCopy(shards_[shard].chunk_headers[k]);
    add_chunk(frame, chunks[k]);
  }
  if (more) frame.AddCopy(EncodePushMore());
  return frame.Finish();
}

void PushFrames::AddRows(FrameBuilder& frame, size_t shard) const {
  if (rows_ == nullptr) return;
  for (size_t t = 0; t < rows_->size(); ++t) {
    if ((*rows_)[t] == nullptr) continue;
    const ShardRows& rows = (*(*rows_)[t])[shard];
    if (rows.ids.empty()) continue;
    const absl::string_view ids(reinterpret_cast<const char*>(rows.ids.data()),
                                rows.ids.size() * sizeof(uint64_t));
    const absl::string_view data =
        fp16_ ? absl::string_view(
                    reinterpret_cast<const char*>(rows.halves.data()),
                    rows.halves.size() * sizeof(uint16_t))
              : absl::string_view(
                    reinterpret_cast<const char*>(rows.values.data()),
                    rows.values.size() * sizeof(float));
    frame.AddCopy(EncodeRowBlockHeader(
        static_cast<uint32_t>(t),
        fp16_ ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32, ids.size(),
        data.size()));
    frame.AddReference(ids);
    frame.AddCopy(EncodeRowDataTag(data.size()));
    frame.AddReference(data);
  }
}

std::vector<std::vector<grpc::ByteBuffer>> PushFrames::BuildTopK(
    uint64_t clock, float loss, const std::vector<float>& gradients) {
  // A retry of the last push resends its selection; the residual already
  // holds what that selection left out.
  if (topk_last_ == nullptr || clock != topk_clock_) {
    auto selected = std::make_shared<std::vector<TopKCompressor::Chunk>>();
    topk_->Compress(gradients, selected.get());
    topk_last_ = std::move(selected);
    topk_clock_ = clock;
  }
  const std::vector<TopKCompressor::Chunk>& selected = *topk_last_;
  return Frame(clock, loss, topk_last_, [&](FrameBuilder& frame, int global) {
    const TopKCompressor::Chunk& chunk = selected[global];
    frame.AddReference(
        absl::string_view(reinterpret_cast<const char*>(chunk.indices.data()),
                          chunk.indices.size() * sizeof(uint32_t)));
    frame.AddCopy(topk_data_tags_[global]);
    frame.AddReference(
        absl::string_view(reinterpret_cast<const char*>(chunk.values.data()),
                          chunk.values.size() * sizeof(float)));
  });
}

absl::StatusOr<uint64_t> PushedVersion(const grpc::ByteBuffer& buffer) {
  proto::PushResponse response;
  if (!ParseMessage(buffer, &response)) {
    return absl::DataLossError("malformed PushResponse");
  }
  return response.version();
}

}  // namespace paramd
