#include "server/shard/push_assembler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

absl::StatusOr<SharedSegment*> StreamSegment::Get(absl::string_view name) {
  if (segment_ != nullptr) {
    if (segment_->name() == name) return segment_.get();
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory segment '", name, "': this stream's is '",
                     segment_->name(), "'; a stream names one segment"));
  }
  ASSIGN_OR_RETURN(segment_, SharedSegment::Attach(name));
  return segment_.get();
}

absl::Status PushAssembler::Add(absl::Span<const absl::string_view> segments) {
  if (!error_.ok()) return error_;
  ++messages_;
  error_ = AddChecked(segments);
  return error_;
}

absl::Status PushAssembler::AddChecked(
    absl::Span<const absl::string_view> segments) {
  PushView part;
  storage_.emplace_back();
  absl::Status s = DecodePush(segments, &part, &storage_.back());
  if (s.ok()) s = ResolveSegment(&part);
  // Checked now, while the next message is on the wire and this one's
  // bytes are still in cache.
  if (s.ok()) s = shard_->CheckChunks(absl::MakeSpan(part.chunks));
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(rpc_, " message ", messages_,
                                               ": ", s.message()));
  }
  const bool first = messages_ == 1;
  if (!first && (!part.job_id.empty() || part.rank != 0 || part.clock != 0 ||
                 part.loss != 0 || part.pull_dtype != 0 ||
                 part.reply_message_bytes != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        rpc_, " message ", messages_,
        ": only the first message names job_id, rank, clock, loss, "
        "pull_dtype and reply_message_bytes"));
  }
  // A message after the first carries a chunk at least, so the messages
  // of one push are bounded by the chunks the shard owns.
  const size_t most = static_cast<size_t>(shard_->store().num_chunks()) + 1;
  if (messages_ > most) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc_, " message ", messages_, ": a push of this shard's ",
                     shard_->store().num_chunks(), " chunk(s) takes at most ",
                     most, " messages"));
  }
  more_ = part.more;
  if (first) {
    push_ = std::move(part);
  } else {
    push_.chunks.insert(push_.chunks.end(), part.chunks.begin(),
                        part.chunks.end());
    push_.rows.insert(push_.rows.end(), part.rows.begin(), part.rows.end());
  }
  // Shard::Push refuses a second block of a table; this bounds the list.
  if (push_.rows.size() > static_cast<size_t>(shard_->store().num_tables())) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc_, ": more row blocks than the job's ",
                     shard_->store().num_tables(), " embedding table(s)"));
  }
  // Bounded by what one push can hold, however long the stream.
  if (push_.chunks.size() > static_cast<size_t>(shard_->store().num_chunks())) {
    return absl::InvalidArgumentError(absl::StrCat(rpc_, ": more than the ",
                                                   shard_->store().num_chunks(),
                                                   " chunks this shard owns"));
  }
  return absl::OkStatus();
}

absl::Status PushAssembler::ResolveSegment(PushView* part) {
  bool in_segment = !part->segment.empty();
  for (const ChunkView& c : part->chunks) in_segment |= c.segment_bytes > 0;
  if (!in_segment) return absl::OkStatus();
  if (segment_ == nullptr) {
    return absl::FailedPreconditionError(
        "shared memory segment: only a StepStream's pushes may lie in one "
        "(this server takes this call's bytes only)");
  }
  SharedSegment* segment = segment_->attached();
  if (!part->segment.empty()) {
    ASSIGN_OR_RETURN(segment, segment_->Get(part->segment));
  }
  if (segment == nullptr) {
    return absl::FailedPreconditionError(
        "shared memory segment: a chunk lies in one, but the stream named "
        "none (PushRequest.segment)");
  }
  const absl::Span<const char> area = segment->push_area();
  for (ChunkView& c : part->chunks) {
    if (c.segment_bytes == 0) continue;
    if (!c.data.empty() || !c.indices.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", c.chunk_index, " of tensor ", c.tensor_id,
                       " lies both in the segment and in the message"));
    }
    if (c.segment_offset > area.size() ||
        c.segment_bytes > area.size() - c.segment_offset ||
        c.segment_offset % alignof(float) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk ", c.chunk_index, " of tensor ", c.tensor_id, " at [",
          c.segment_offset, ", +", c.segment_bytes,
          ") is not an aligned range of the segment's push area of ",
          area.size(), " bytes"));
    }
    c.data = absl::string_view(area.data() + c.segment_offset, c.segment_bytes);
    shard_->NoteSharedMemory(c.segment_bytes, 0);
  }
  return absl::OkStatus();
}

absl::Status PushAssembler::Finish(bool cancelled,
                                   proto::PushResponse* response) {
  RETURN_IF_ERROR(error_);
  if (messages_ == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc_, ": no message arrived"));
  }
  // A stream that broke off reads as ended: only a worker that is still
  // there gets its push applied (a partial one is refused by Push anyway).
  if (cancelled) {
    return absl::CancelledError(
        absl::StrCat(rpc_, ": the worker cancelled the push; nothing applied"));
  }
  return shard_->Push(push_, response);
}

}  // namespace paramd
