// PushPieces: one push arriving as several messages of a stream (a
// PushStream, or a StepStream step linked by PushRequest.more). Each
// message is size-checked and handed to a PushAssembler as it comes, its
// bytes kept here — the assembled push references them in place — until
// the push is applied; a push whose stream ends early applies nothing.
//
// Thread-compatible: one call's handler or reactor uses it.
#ifndef PARAMD_SERVER_RPC_PUSH_PIECES_H_
#define PARAMD_SERVER_RPC_PUSH_PIECES_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <deque>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc/grpc_frames.h"
#include "proto/paramd.pb.h"
#include "server/shard/push_assembler.h"
#include "server/shard/shard.h"

namespace paramd {

class PushPieces {
 public:
  // `shard` outlives this; `rpc` names the call in errors; `segment`, a
  // StepStream reactor's, lets chunks lie in the stream's shared memory
  // (PushAssembler).
  PushPieces(Shard* shard, const char* rpc, StreamSegment* segment = nullptr)
      : shard_(shard), rpc_(rpc), push_(shard, rpc, segment) {}

  // Takes the next message (checked as it comes; errors name it); returns
  // whether it says more pieces follow (PushRequest.more).
  absl::StatusOr<bool> Add(const grpc::ByteBuffer& message);
  // The refusal when the stream ended before the message whose `more` is
  // unset: nothing of the push was applied.
  absl::Status CutOff() const;

  // Applies the whole push (PushAssembler::Finish).
  absl::Status Finish(bool cancelled, proto::PushResponse* response) {
    return push_.Finish(cancelled, response);
  }
  // The push so far: the first message's header and every chunk read
  // (each checked: ChunkView::checked_local).
  const PushView& push() const { return push_.push(); }
  // A StepStream step's push: applies it and returns the pull that
  // answers it (PullAfter); `reply_bytes` receives its
  // reply_message_bytes (0: one message).
  absl::StatusOr<proto::PullRequest> Apply(bool cancelled,
                                           uint32_t* reply_bytes);

 private:
  Shard* const shard_;
  const char* const rpc_;
  std::deque<ReceivedFrame> frames_;
  PushAssembler push_;
};

// The pull that answers `push` in a PushPull or a StepStream step: the
// same job and rank at its clock + 1, as its pull_dtype.
proto::PullRequest PullAfter(const PushView& push);

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_PUSH_PIECES_H_
