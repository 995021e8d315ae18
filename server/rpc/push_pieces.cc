#include "server/rpc/push_pieces.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/rpc/byte_methods.h"

namespace paramd {

absl::StatusOr<bool> PushPieces::Add(const grpc::ByteBuffer& message) {
  const std::string what = absl::StrCat(rpc_, " message ", frames_.size() + 1);
  RETURN_IF_ERROR(CheckSize(what, message, shard_->max_message_bytes()));
  frames_.emplace_back();
  if (absl::Status s = frames_.back().Take(message); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  RETURN_IF_ERROR(push_.Add(frames_.back().segments()));
  return push_.more();
}

absl::Status PushPieces::CutOff() const {
  return absl::InvalidArgumentError(absl::StrCat(
      rpc_, ": the stream ended after message ", frames_.size(),
      " of a push whose `more` said another follows; nothing applied"));
}

absl::StatusOr<proto::PullRequest> PushPieces::Apply(bool cancelled,
                                                     uint32_t* reply_bytes) {
  proto::PushResponse pushed;
  RETURN_IF_ERROR(push_.Finish(cancelled, &pushed));
  *reply_bytes = push_.push().reply_message_bytes;
  return PullAfter(push_.push());
}

proto::PullRequest PullAfter(const PushView& push) {
  proto::PullRequest pull;
  pull.set_job_id(push.job_id);
  pull.set_rank(push.rank);
  pull.set_clock(push.clock + 1);
  pull.set_dtype(static_cast<proto::DType>(push.pull_dtype));
  return pull;
}

}  // namespace paramd
