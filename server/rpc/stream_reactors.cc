#include "server/rpc/stream_reactors.h"

#include <chrono>
#include <utility>

#include "common/rpc/credentials.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/wire_format.h"

namespace paramd {

PushStreamReactor::PushStreamReactor(GrpcParameterService* service,
                                     AsyncCallQueue* queue,
                                     std::unique_ptr<CallSlot> slot)
    : AsyncCall(queue, std::move(slot)),
      service_(service),
      push_(service->shard_, "PushStream") {}

void PushStreamReactor::OnStart() {
  const grpc::Status auth =
      CheckCallToken(*service_->security_, *context(), "PushStream");
  if (!auth.ok()) {
    Finish(auth);
    return;
  }
  StartRead(&message_);
}

void PushStreamReactor::OnReadDone(bool ok) {
  if (ok) {
    // The stream's end ends the push; PushRequest.more is not needed.
    if (absl::StatusOr<bool> more = push_.Add(message_); !more.ok()) {
      Finish(ToGrpcStatus(more.status()));
      return;
    }
    StartRead(&message_);
    return;
  }
  // The worker half-closed its side, cancelled, or its deadline passed: the
  // read fails alike, and a cancel is told only by an event that may come
  // after this one. The push is decided once those have run.
  Alarm();
}

void PushStreamReactor::OnAlarm() {
  if (decided_) {
    // A reply held back by the reply faults: lost, or sent now.
    Finish(ToGrpcStatus(lost_), reply_);
    return;
  }
  decided_ = true;
  // A push counts only once the worker ended the stream itself: one cut
  // off by a cancel or a passed deadline applies nothing, whole or not.
  const bool cut_off =
      cancelled_ || context()->deadline() <= std::chrono::system_clock::now();
  proto::PushResponse reply;
  if (const absl::Status s = push_.Finish(cut_off, &reply); !s.ok()) {
    Finish(ToGrpcStatus(s));
    return;
  }
  reply_ = SerializeMessage(reply);
  HoldReply(*service_->faults_, "PushStream", &lost_);
}

PullStreamReactor::PullStreamReactor(GrpcParameterService* service,
                                     AsyncCallQueue* queue,
                                     std::unique_ptr<CallSlot> slot)
    : AsyncCall(queue, std::move(slot)),
      service_(service),
      pull_(service->shard_) {}

void PullStreamReactor::OnStart() {
  grpc::Status auth =
      CheckCallToken(*service_->security_, *context(), "PullStream");
  if (!auth.ok()) {
    Finish(auth);
    return;
  }
  StartRead(&request_);
}

void PullStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "PullStream: no PullRequest"));
    return;
  }
  proto::PullRequest pull;
  if (absl::Status s = service_->ParsePull("PullStream", request_, &pull);
      !s.ok()) {
    Finish(ToGrpcStatus(s));
    return;
  }
  const bool half = pull.dtype() == proto::DTYPE_FLOAT16;
  const int64_t message_bytes = PullStreamMessageBytes(pull);
  // Waits without a thread; the call's deadline or the worker's cancel
  // ends the wait through OnCancel.
  pull_.Start(pull,
              [this, half, message_bytes](
                  absl::StatusOr<std::shared_ptr<const ParamSnapshot>> result) {
                Pulled(std::move(result), half, message_bytes);
              });
}

void PullStreamReactor::Pulled(
    absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot, bool half,
    int64_t message_bytes) {
  if (!snapshot.ok()) {
    Finish(ToGrpcStatus(snapshot.status()));
    return;
  }
  parts_ = service_->PullParts(*snapshot, half, message_bytes);
  HoldReply(*service_->faults_, "PullStream", &lost_);
}

void PullStreamReactor::OnAlarm() {
  if (!lost_.ok()) {
    Finish(ToGrpcStatus(lost_));
    return;
  }
  next_part_ = 1;
  StartWrite(&parts_[0]);
}

void PullStreamReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(
        ToGrpcStatus(absl::CancelledError("PullStream: the worker went away")));
    return;
  }
  if (next_part_ < parts_.size()) {
    StartWrite(&parts_[next_part_++]);
    return;
  }
  Finish(grpc::Status::OK);
}

}  // namespace paramd
