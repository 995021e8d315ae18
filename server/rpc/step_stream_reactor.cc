#include "server/rpc/step_stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
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
  if (!ok && sliced_) {
    // Its chunks read so far stay applied (proto/paramd.proto).
    FailSlices(absl::InvalidArgumentError(absl::StrCat(
        "StepStream: the stream ended after ", pieces_->push().chunks.size(),
        " chunks of a push in slices whose `more` said another message "
        "follows; those chunks are applied")));
    return;
  }
  if (!ok) {
    // The worker half-closed (or the call is over); a push it left in
    // pieces is never applied.
    End(pieces_ == nullptr ? absl::OkStatus() : pieces_->CutOff());
    return;
  }
  const bool first = pieces_ == nullptr;
  if (first) {
    pieces_ =
        std::make_unique<PushPieces>(service_->shard_, "StepStream", &segment_);
  }
  const size_t before = first ? 0 : pieces_->push().chunks.size();
  // Outside a step until the push is whole: nothing of it is in the shard.
  absl::StatusOr<bool> more = pieces_->Add(request_);
  if (!more.ok() && sliced_) {
    FailSlices(more.status());
    return;
  }
  if (!more.ok()) {
    End(more.status());
    return;
  }
  if (first) {
    const PushView& push = pieces_->push();
    sliced_ = push.slices && ServersTakeSlices(service_->shard_->config()) &&
              push.segment.empty() && segment_.attached() == nullptr &&
              push.rows.empty() && push.pull_dtype != proto::DTYPE_FLOAT16;
  }
  if (sliced_) {
    ReadSlice(before, first, /*last=*/!*more);
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
  if (slice_held_) {
    slice_held_ = false;
    if (!slice_lost_.ok()) {
      {
        absl::MutexLock lock(&mu_);
        answering_ = false;
      }
      FailSlices(slice_lost_);
      return;
    }
    next_part_ = 1;
    StartWrite(&reply_[0]);
    return;
  }
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
  if (!ok && sliced_) {
    {
      absl::MutexLock lock(&mu_);
      answering_ = false;
    }
    FailSlices(absl::CancelledError("StepStream: the worker went away"));
    return;
  }
  if (!ok) {
    End(absl::CancelledError("StepStream: the worker went away"));
    return;
  }
  if (sliced_ && next_part_ >= reply_.size()) {
    SliceWritten();
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

void StepStreamReactor::ReadSlice(size_t first, bool first_message, bool last) {
  const PushView& push = pieces_->push();
  if (first_message) {
    header_ = push;
    header_.chunks.clear();
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      cancelled = cancelled_;
      in_step_ = !cancelled;
      read_all_ = false;
      failed_.reset();
    }
    if (cancelled) {
      End(absl::CancelledError("StepStream: cancelled"));
      return;
    }
  }
  bool complete = false;
  std::vector<int> locals;
  absl::Status s = service_->shard_->PushSlice(
      header_, absl::MakeConstSpan(push.chunks).subspan(first), &complete);
  if (s.ok() && last && !complete) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "StepStream: the push of rank ", header_.rank, " at clock ",
        header_.clock, " ended without all of shard ",
        service_->shard_->store().shard(),
        "'s chunks; those sent are applied"));
  }
  if (!s.ok()) {
    FailSlices(s);
    return;
  }
  for (size_t i = first; i < push.chunks.size(); ++i) {
    locals.push_back(push.chunks[i].checked_local);
  }
  bool answer = false;
  {
    absl::MutexLock lock(&mu_);
    read_all_ = last;
    if (!locals.empty()) unanswered_.push_back(std::move(locals));
    answer = !answering_ && !unanswered_.empty();
    answering_ |= answer;
    if (last && !answering_ && unanswered_.empty()) {
      // A shard without chunks: nothing to answer but the version.
      unanswered_.push_back({});
      answering_ = answer = true;
    }
  }
  if (!last) StartRead(&request_);
  if (answer) AnswerSlice();
}

void StepStreamReactor::AnswerSlice() {
  std::vector<int> locals;
  {
    absl::MutexLock lock(&mu_);
    locals = unanswered_.front();
  }
  proto::PullRequest pull = PullAfter(header_);
  pull_.Start(
      pull,
      [this](absl::StatusOr<std::shared_ptr<const ParamSnapshot>> result) {
        SlicePulled(std::move(result));
      },
      std::move(locals));
}

void StepStreamReactor::SlicePulled(
    absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot) {
  Hold hold(this);
  std::vector<int> locals;
  {
    absl::MutexLock lock(&mu_);
    if (snapshot.ok() && (failed_.has_value() || cancelled_)) {
      snapshot =
          failed_.value_or(absl::CancelledError("StepStream: cancelled"));
    }
    if (!snapshot.ok()) answering_ = false;
    if (snapshot.ok()) locals = unanswered_.front();
  }
  if (!snapshot.ok()) {
    FailSlices(snapshot.status());
    return;
  }
  // One message per run of consecutive chunks (a slice is one, as sent).
  reply_.clear();
  for (size_t i = 0; i < locals.size();) {
    size_t j = i + 1;
    while (j < locals.size() && locals[j] == locals[j - 1] + 1) ++j;
    reply_.push_back(service_->PullFrame(
        *snapshot, static_cast<size_t>(locals[i]),
        static_cast<size_t>(locals[j - 1]) + 1, /*half=*/false));
    i = j;
  }
  if (reply_.empty())
    reply_.push_back(service_->PullFrame(*snapshot, 0, 0, false));
  // The testing section's reply faults act on each slice's reply.
  slice_held_ = true;
  HoldReply(*service_->faults_, "StepStream", &slice_lost_);
}

void StepStreamReactor::SliceWritten() {
  bool answer = false, done = false;
  std::optional<absl::Status> failed;
  {
    absl::MutexLock lock(&mu_);
    unanswered_.pop_front();
    failed = failed_;
    answer = !failed.has_value() && !unanswered_.empty();
    answering_ = answer;
    done = !failed.has_value() && read_all_ && unanswered_.empty();
    if (done) in_step_ = false;
  }
  reply_.clear();
  if (failed.has_value()) {
    EndStep(*failed);
  } else if (answer) {
    AnswerSlice();
  } else if (done) {
    // The step is over: the next one's first message.
    sliced_ = false;
    pieces_.reset();
    StartRead(&request_);
  }
}

void StepStreamReactor::FailSlices(const absl::Status& s) {
  bool now;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.has_value()) failed_ = s;
    now = !answering_;
  }
  // A waiting pull ends with CANCELLED, and SlicePulled ends the step; a
  // write out ends it from SliceWritten.
  if (now) {
    EndStep(s);
  } else {
    pull_.Cancel();
  }
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
