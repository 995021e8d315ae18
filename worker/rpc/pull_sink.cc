#include "worker/rpc/pull_sink.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "common/base/status_macros.h"
#include "common/rpc/grpc_frames.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"

namespace paramd {

PullSink::PullSink(const PartitionPlan& plan, const FlatLayout& layout,
                   int shard, bool half, absl::Span<float> params)
    : plan_(plan),
      layout_(layout),
      shard_(shard),
      half_(half),
      params_(params),
      seen_(plan.chunks().size(), 0) {}

void PullSink::WidenPending() {
  if (pending_ < 0) return;
  const ChunkSpec& c = plan_.chunks()[pending_];
  HalvesToFloats(
      absl::MakeConstSpan(halves_.data(), static_cast<size_t>(c.length)),
      params_.subspan(FlatOffset(layout_, c), static_cast<size_t>(c.length)));
  pending_ = -1;
}

absl::Status PullSink::Consume(const grpc::ByteBuffer& message) {
  if (timed_ && first_ == absl::InfinitePast()) first_ = absl::Now();
  const PartitionPlan& plan = plan_;
  const bool half = half_;
  const int expected_dtype = half ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32;
  const int64_t element_bytes = half ? 2 : kElementBytes;
  ReceivedFrame frame;
  RETURN_IF_ERROR(frame.Take(message));
  absl::StatusOr<uint64_t> version = DecodePull(
      frame.segments(),
      [&](uint32_t tensor_id, uint32_t chunk_index, int dtype, uint64_t bytes) {
        // Halves land in a scratch buffer and are widened into place once
        // the decoder has copied them, i.e. when the next chunk comes.
        WidenPending();
        PullChunkTarget target;
        const int global = plan.Find(tensor_id, chunk_index);
        if (global < 0 || plan.chunks()[global].shard != shard_ ||
            seen_[global] || dtype != expected_dtype ||
            static_cast<int64_t>(bytes) !=
                plan.chunks()[global].length * element_bytes) {
          target.error = absl::StrCat(
              "shard ", shard_, " sent chunk ", chunk_index, " of tensor ",
              tensor_id, " (", bytes, " bytes, dtype ", dtype,
              "), which does not match the plan or came twice");
          return target;
        }
        seen_[global] = 1;
        ++chunks_;
        const ChunkSpec& c = plan.chunks()[global];
        if (half) {
          halves_.resize(
              std::max(halves_.size(), static_cast<size_t>(c.length)));
          pending_ = global;
          target.dest = reinterpret_cast<char*>(halves_.data());
          return target;
        }
        target.dest =
            reinterpret_cast<char*>(params_.data() + FlatOffset(layout_, c));
        return target;
      },
      pull_area_);
  if (version.ok()) WidenPending();
  pending_ = -1;
  if (!version.ok()) return version.status();
  if (messages_++ > 0 && *version != version_) {
    return absl::DataLossError(absl::StrCat("shard ", shard_, " sent versions ",
                                            version_, " and ", *version,
                                            " in one pull"));
  }
  version_ = *version;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> PullSink::Finish() const {
  const size_t owned = plan_.ChunksOfShard(shard_).size();
  if (chunks_ != owned) {
    return absl::DataLossError(
        absl::StrCat("Pull from shard ", shard_, ": ", chunks_,
                     " chunks; the plan gives it ", owned));
  }
  return version_;
}

absl::StatusOr<uint64_t> PulledVersion(const std::vector<PullSink>& sinks) {
  uint64_t version = UINT64_MAX;
  for (const PullSink& sink : sinks) {
    ASSIGN_OR_RETURN(uint64_t v, sink.Finish());
    version = std::min(version, v);
  }
  return version;
}

}  // namespace paramd
