#include "worker/rpc/step_stream.h"

#include <utility>

#include "common/rpc/grpc_status.h"

namespace paramd {

StepStream::StepStream(grpc::GenericStub* stub, const std::string& method,
                       std::unique_ptr<grpc::ClientContext> context)
    : context_(std::move(context)) {
  stub->PrepareBidiStreamingCall(context_.get(), method, grpc::StubOptions(),
                                 this);
  // Steps write from outside gRPC's reactions: the hold keeps the call
  // open (and OnDone away) until its read side ends or it is destroyed.
  AddHold();
  StartRead(&in_);
  StartCall();
}

StepStream::~StepStream() {
  context_->TryCancel();
  Release();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&finished_));
}

void StepStream::Release() {
  {
    absl::MutexLock lock(&mu_);
    if (!held_) return;
    held_ = false;
  }
  RemoveHold();
}

bool StepStream::over() const {
  absl::MutexLock lock(&mu_);
  // Once the read side ended no reply can come, though OnDone may not
  // have run yet.
  return over_ || !held_;
}

void StepStream::Step(grpc::ByteBuffer message, PullSink* sink,
                      std::function<void(absl::Status)> done,
                      absl::Time* written) {
  absl::Status over;
  {
    absl::MutexLock lock(&mu_);
    if (over_ || !held_) {
      over = end_.ok() ? absl::UnavailableError("StepStream: the call is over")
                       : end_;
    } else {
      // The write's own hold, taken while the call's keeps OnDone away.
      AddHold();
      sink_ = sink;
      done_ = std::move(done);
      // The last step's write may not have reported done yet, though its
      // reply came: this one then follows from OnWriteDone.
      if (writing_) {
        next_ = std::move(message);
        next_written_ = written;
        queued_ = true;
        return;
      }
      writing_ = true;
      out_ = std::move(message);
      out_written_ = written;
    }
  }
  if (!over.ok()) {
    done(std::move(over));
    return;
  }
  StartWrite(&out_);
}

void StepStream::OnWriteDone(bool) {
  // (A failed write: the call is over, and OnDone says why.)
  bool more = false;
  {
    absl::MutexLock lock(&mu_);
    if (out_written_ != nullptr) *out_written_ = absl::Now();
    out_written_ = nullptr;
    writing_ = queued_;
    if (queued_) {
      queued_ = false;
      out_ = std::move(next_);
      out_written_ = next_written_;
      next_written_ = nullptr;
      more = true;
    }
  }
  if (more) StartWrite(&out_);
  RemoveHold();
}

void StepStream::OnReadDone(bool ok) {
  if (!ok) {
    // The server ended the call: OnDone says why.
    Release();
    return;
  }
  std::function<void(absl::Status)> done;
  absl::Status s;
  {
    absl::MutexLock lock(&mu_);
    done = std::move(done_);
    done_ = nullptr;
    // The reply came before gRPC reported its write done: the write time
    // is had now, for the step that is about to end cannot take it later.
    if (out_written_ != nullptr) *out_written_ = absl::Now();
    out_written_ = nullptr;
    s = sink_ != nullptr
            ? sink_->Consume(in_)
            : absl::DataLossError("StepStream: a reply no step asked for");
    sink_ = nullptr;
  }
  if (s.ok()) {
    StartRead(&in_);
  } else {
    context_->TryCancel();
  }
  if (done) done(std::move(s));
}

void StepStream::OnDone(const grpc::Status& status) {
  std::function<void(absl::Status)> done;
  absl::Status end = FromGrpcStatus(status);
  if (end.ok()) end = absl::UnavailableError("StepStream: the server ended it");
  {
    absl::MutexLock lock(&mu_);
    over_ = true;
    end_ = end;
    done = std::move(done_);
    done_ = nullptr;
  }
  if (done) done(end);
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

}  // namespace paramd
