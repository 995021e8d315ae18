#include "server/rpc/step_stream_reactor.h"

#include <utility>

#include "common/rpc/credentials.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/wire_format.h"

namespace paramd {

StepStreamReactor::StepStreamReactor(GrpcParameterService* service,
                                     AsyncCallQueue* queue,
                                     std::unique_ptr<CallSlot> slot)
    : AsyncCall(queue, std::move(slot)),
      service_(service),
      pull_(service->shard_) {}

void StepStreamReactor::OnStart() {
  const grpc::Status auth =
      CheckCallToken(*service_->security_, *context(), "StepStream");
  if (!auth.ok()) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(auth);
    return;
  }
  StartRead(&request_);
}

void StepStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The worker half-closed (or the call is over); a push it left in
    // pieces is never applied.
    End(pieces_ == nullptr ? absl::OkStatus() : pieces_->CutOff());
    return;
  }
  if (pieces_ == nullptr) {
    pieces_ =
        std::make_unique<PushPieces>(service_->shard_, "StepStream", &segment_);
  }
  // Outside a step until the push is whole: nothing of it is in the shard.
  absl::StatusOr<bool> more = pieces_->Add(request_);
  if (!more.ok()) {
    End(more.status());
    return;
  }
  if (*more) {
    StartRead(&request_);
    return;
  }
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
    in_step_ = !cancelled;
  }
  if (cancelled) {
    End(absl::CancelledError("StepStream: cancelled"));
    return;
  }
  const std::unique_ptr<PushPieces> step = std::move(pieces_);
  absl::StatusOr<proto::PullRequest> pull =
      step->Apply(/*cancelled=*/false, &reply_bytes_);
  if (!pull.ok()) {
    EndStep(pull.status());
    return;
  }
  traced_rank_ = static_cast<int>(pull->rank());
  traced_clock_ = pull->clock();
  StartPull(*pull);
}

void StepStreamReactor::StartPull(const proto::PullRequest& pull) {
  const bool half = pull.dtype() == proto::DTYPE_FLOAT16;
  pull_.Start(pull,
              [this, half](
                  absl::StatusOr<std::shared_ptr<const ParamSnapshot>> result) {
                Pulled(std::move(result), half);
              });
}

void StepStreamReactor::Pulled(
    absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot, bool half) {
  // On the thread whose push made the pull readable, the call may end (a
  // cancel) while the reply is made: this object stays until it is.
  Hold hold(this);
  if (!snapshot.ok()) {
    EndStep(snapshot.status());
    return;
  }
  reply_begin_ = service_->shard_->trace().WantsPull(traced_clock_)
                     ? absl::Now()
                     : absl::InfinitePast();
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    in_step_ = false;
    cancelled = cancelled_;
  }
  if (cancelled) {
    End(absl::CancelledError("StepStream: cancelled"));
    return;
  }
  held_ = Held{std::move(*snapshot), half, absl::OkStatus()};
  HoldReply(*service_->faults_, "StepStream", &held_->lost);
}

void StepStreamReactor::OnAlarm() {
  if (!held_.has_value()) return;
  Held held = std::move(*held_);
  held_.reset();
  Answer(held.snapshot, held.half, held.lost);
}

void StepStreamReactor::Answer(
    const std::shared_ptr<const ParamSnapshot>& snapshot, bool half,
    const absl::Status& lost) {
  if (!lost.ok()) {
    End(lost);
    return;
  }
  // A stream with a segment answers in its pull area (the worker reads it
  // only once this reply is there), else in the messages.
  reply_ = segment_.attached() != nullptr
               ? service_->PullInSegment(snapshot, half, reply_bytes_,
                                         segment_.attached()->pull_area())
               : service_->PullParts(snapshot, half, reply_bytes_);
  next_part_ = 1;
  StartWrite(&reply_[0]);
}

void StepStreamReactor::EndStep(const absl::Status& s) {
  {
    absl::MutexLock lock(&mu_);
    in_step_ = false;
  }
  End(s);
}

void StepStreamReactor::OnWriteDone(bool ok) {
  if (!ok) {
    End(absl::CancelledError("StepStream: the worker went away"));
    return;
  }
  if (next_part_ < reply_.size()) {
    StartWrite(&reply_[next_part_++]);
    return;
  }
  if (reply_begin_ != absl::InfinitePast()) {
    size_t bytes = 0;
    for (const grpc::ByteBuffer& part : reply_) bytes += part.Length();
    service_->shard_->trace().Reply(traced_rank_, traced_clock_, reply_begin_,
                                    absl::Now(), bytes);
  }
  reply_.clear();
  StartRead(&request_);
}

void StepStreamReactor::OnCancel() {
  bool in_step;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    in_step = in_step_;
  }
  // In a step its pull's `done` ends the step and the call (or is running
  // and will; a pull not started yet is cancelled when it starts).
  pull_.Cancel();
  CancelAlarm();  // A reply held back is not waited for.
  if (!in_step) End(absl::CancelledError("StepStream: cancelled"));
}

void StepStreamReactor::End(const absl::Status& s) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  Finish(ToGrpcStatus(s));
}

}  // namespace paramd
