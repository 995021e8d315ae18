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

void StepStream::Step(std::vector<grpc::ByteBuffer> messages, PullSink* sink,
                      std::function<void(absl::Status)> done,
                      absl::Time* written) {
  absl::Status over;
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    if (over_ || !held_) {
      over = end_.ok() ? absl::UnavailableError("StepStream: the call is over")
                       : end_;
    } else {
      sink_ = sink;
      done_ = std::move(done);
      for (grpc::ByteBuffer& message : messages) {
        // Each write's own hold, taken while the call's keeps OnDone away.
        AddHold();
        out_.push_back({std::move(message)});
      }
      if (!out_.empty()) out_.back().written = written;
      // The last step's final write may not have reported done yet,
      // though its reply came: this one's then follow from OnWriteDone.
      start = !writing_ && !out_.empty();
      if (start) writing_ = true;
    }
  }
  if (!over.ok()) {
    done(std::move(over));
    return;
  }
  if (start) StartWrite(&out_.front().message);
}

void StepStream::OnWriteDone(bool) {
  // (A failed write: the call is over, and OnDone says why; the writes
  // after it fail too.)
  grpc::ByteBuffer* next = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (out_.front().written != nullptr) *out_.front().written = absl::Now();
    out_.pop_front();
    writing_ = !out_.empty();
    if (writing_) next = &out_.front().message;
  }
  if (next != nullptr) StartWrite(next);
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
  bool partial = false;
  {
    absl::MutexLock lock(&mu_);
    s = sink_ != nullptr
            ? sink_->Consume(in_)
            : absl::DataLossError("StepStream: a reply no step asked for");
    // More messages of this step's reply follow.
    partial = s.ok() && !sink_->complete();
  }
  if (partial) {
    StartRead(&in_);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    done = std::move(done_);
    done_ = nullptr;
    // The reply came before gRPC reported its writes done: their times are
    // had now, for the step that is about to end cannot take them later.
    for (Write& w : out_) {
      if (w.written != nullptr) *w.written = absl::Now();
      w.written = nullptr;
    }
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
