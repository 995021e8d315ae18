#include "worker/rpc/step_stream.h"

#include <utility>

#include "common/rpc/grpc_status.h"

namespace paramd {

StepStream::StepStream(grpc::GenericStub* stub, const std::string& method,
                       std::unique_ptr<grpc::ClientContext> context,
                       StepQueue* queue)
    : context_(std::move(context)), queue_(queue) {
  call_ = stub->PrepareCall(context_.get(), method, queue_->cq());
  call_->StartCall(&started_);
  // A read is always on the queue: its failure is how the call's end is
  // heard, between steps too.
  call_->Read(&in_, &read_);
}

StepStream::~StepStream() {
  context_->TryCancel();
  while (busy()) queue_->Poll(absl::InfiniteFuture());
}

void StepStream::Step(std::vector<grpc::ByteBuffer> messages, PullSink* sink,
                      std::function<void(absl::Status)> done,
                      absl::Time* written) {
  if (over()) {
    done(end_.ok() ? absl::UnavailableError("StepStream: the call is over")
                   : end_);
    return;
  }
  sink_ = sink;
  done_ = std::move(done);
  for (grpc::ByteBuffer& message : messages) {
    out_.push_back({std::move(message)});
  }
  if (!out_.empty()) out_.back().written = written;
  // The last step's final write may not have reported done yet, though
  // its reply came: this one's then follow from OnWritten. The first
  // step's wait for the call's start (StartCall and Write share gRPC's
  // operation set): they follow from OnStarted.
  if (!writing_ && !starting_ && !out_.empty()) WriteFront();
}

void StepStream::Append(grpc::ByteBuffer message) {
  if (!done_ || over()) return;
  out_.push_back({std::move(message)});
  if (!writing_ && !starting_) WriteFront();
}

void StepStream::WriteFront() {
  writing_ = true;
  call_->Write(out_.front().message, &wrote_);
}

void StepStream::WriteNext(bool ok) {
  if (!ok) {
    // The call could not start or is over: its read fails, which ends it
    // (Finish says why) and the step; nothing more goes out.
    out_.clear();
    return;
  }
  if (!out_.empty()) WriteFront();
}

void StepStream::OnStarted(bool ok) {
  starting_ = false;
  WriteNext(ok);
}

void StepStream::OnWritten(bool ok) {
  writing_ = false;
  if (out_.front().written != nullptr) *out_.front().written = absl::Now();
  out_.pop_front();
  WriteNext(ok);
}

void StepStream::OnRead(bool ok) {
  reading_ = false;
  if (!ok) {
    // The call ended: Finish says why, and ends the step in flight.
    finishing_ = true;
    call_->Finish(&status_, &finished_);
    return;
  }
  absl::Status s =
      sink_ != nullptr
          ? sink_->Consume(in_)
          : absl::DataLossError("StepStream: a reply no step asked for");
  // The next read goes on the queue whatever came: after a refusal it is
  // the cancelled call's end that it hears.
  const bool partial = s.ok() && !sink_->complete();
  reading_ = true;
  call_->Read(&in_, &read_);
  if (partial) return;  // More messages of this step's reply follow.
  // The reply came before gRPC reported its writes done: their times are
  // had now, for the step that is about to end cannot take them later.
  for (Write& w : out_) {
    if (w.written != nullptr) *w.written = absl::Now();
    w.written = nullptr;
  }
  if (!s.ok()) {
    over_ = true;  // No step follows on a call whose reply did not read.
    end_ = s;
    context_->TryCancel();
  }
  EndStep(std::move(s));
}

void StepStream::OnFinished(bool) {
  finishing_ = false;
  absl::Status end = FromGrpcStatus(status_);
  if (end.ok()) end = absl::UnavailableError("StepStream: the server ended it");
  if (!over_) end_ = end;
  over_ = true;
  EndStep(std::move(end));
}

void StepStream::EndStep(absl::Status s) {
  if (!done_) return;
  std::function<void(absl::Status)> done = std::move(done_);
  done_ = nullptr;
  sink_ = nullptr;
  // A step that failed with writes still out: their times are not had,
  // and where they would go ends with the step.
  for (Write& w : out_) w.written = nullptr;
  done(std::move(s));
}

}  // namespace paramd
