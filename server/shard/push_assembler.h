// PushAssembler: one push that arrives as a sequence of messages
// (PushStream, or a StepStream step in pieces: proto/paramd.proto),
// assembled and checked as it comes and applied to the shard only when it
// is whole.
//
// Each message is decoded and its chunks checked (ownership, dtype, size,
// finiteness) when it is added, while the next one is still on the wire.
// Only the first message may name job_id, rank, clock, loss, pull_dtype
// and reply_message_bytes; the chunks of all messages together may not
// outnumber those the shard owns, nor the messages the shard's chunks
// and one more. Any refused message refuses the
// whole push: Finish then applies nothing.
// Plain C++, no gRPC: the rpc layer reads messages and hands over their
// bytes.
//
// Thread-compatible: one stream's handler uses it.
//
// StreamSegment, beside it: the shared-memory segment
// (common/wire/shared_segment.h) a StepStream's pushes named, attached on
// first use and held for the stream's life: where that stream's pushes'
// chunk bytes lie and its replies' go. A stream names one segment only.
// Thread-compatible: one stream's reactor uses it.
#ifndef PARAMD_SERVER_SHARD_PUSH_ASSEMBLER_H_
#define PARAMD_SERVER_SHARD_PUSH_ASSEMBLER_H_

#include <deque>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/wire/shared_segment.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "server/shard/shard.h"

namespace paramd {

class StreamSegment {
 public:
  // The segment `name`, mapped the first time it is named;
  // FailedPrecondition ("shared memory segment ...") when it cannot be, or
  // when the stream named another before.
  absl::StatusOr<SharedSegment*> Get(absl::string_view name);
  // The segment, once a push named one; null before.
  SharedSegment* attached() const { return segment_.get(); }

 private:
  std::unique_ptr<SharedSegment> segment_;
};

class PushAssembler {
 public:
  // `shard` outlives the assembler; `rpc` names the call in errors. With
  // `segment` (a StepStream's), chunks may lie in the shared-memory
  // segment a push names (PushRequest.segment); without, such a push is
  // refused ("shared memory segment ...": FailedPrecondition).
  explicit PushAssembler(Shard* shard, const char* rpc = "PushStream",
                         StreamSegment* segment = nullptr)
      : shard_(shard), rpc_(rpc), segment_(segment) {}

  // Adds the next message: `segments` are its bytes as received (one
  // PushRequest in the wire format of common/wire/wire_format.h), which must
  // stay unchanged until Finish returns. An error names the message and
  // refuses the push; later calls return it again.
  absl::Status Add(absl::Span<const absl::string_view> segments);

  // Applies the assembled push to the shard (Shard::Push) and fills
  // `response`. Refused, with nothing applied, when no message arrived or
  // an Add failed; `cancelled`: the sender went away before the end, so
  // nothing is applied either.
  absl::Status Finish(bool cancelled, proto::PushResponse* response);

  size_t messages() const { return messages_; }
  // Whether the last message added said another follows (PushRequest.more).
  bool more() const { return more_; }
  // The push so far: its first message's header fields (valid after a
  // successful Add).
  const PushView& push() const { return push_; }

 private:
  absl::Status AddChecked(absl::Span<const absl::string_view> segments);
  // Points the chunks of `part` that lie in the stream's segment at their
  // bytes there.
  absl::Status ResolveSegment(PushView* part);

  Shard* const shard_;
  const char* const rpc_;
  StreamSegment* const segment_;
  PushView push_;
  bool more_ = false;
  // Chunks that had to be copied out of the received bytes (misaligned or
  // split across slices) live here until Finish.
  std::deque<std::unique_ptr<float[]>> storage_;
  size_t messages_ = 0;
  absl::Status error_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_PUSH_ASSEMBLER_H_
