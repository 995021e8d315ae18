#include "worker/rpc/queued_stream.h"

#include <utility>

#include "absl/time/time.h"
#include "common/rpc/grpc_status.h"

namespace paramd {

QueuedStream::QueuedStream(
    grpc::GenericStub* stub, grpc::ClientContext* context,
    const std::string& method, std::vector<grpc::ByteBuffer> messages,
    Reader reader, std::function<void(absl::Status)> done, StepQueue* queue)
    : context_(context),
      queue_(queue),
      out_(std::make_move_iterator(messages.begin()),
           std::make_move_iterator(messages.end())),
      reader_(std::move(reader)),
      done_(std::move(done)) {
  call_ = stub->PrepareCall(context_, method, queue_->cq());
  call_->StartCall(&started_);
  // A read is always on the queue: its failure is how the call's end is
  // heard.
  call_->Read(&in_, &read_);
}

QueuedStream::~QueuedStream() {
  if (busy()) context_->TryCancel();
  while (busy()) queue_->Poll(absl::InfiniteFuture());
}

void QueuedStream::WriteFront() {
  writing_ = true;
  if (out_.size() == 1) {
    call_->WriteLast(out_.front(), grpc::WriteOptions(), &wrote_);
  } else {
    call_->Write(out_.front(), &wrote_);
  }
}

void QueuedStream::WriteNext(bool ok) {
  if (!ok) {
    // The call could not start or is over: its read fails, and Finish
    // says why; nothing more goes out.
    out_.clear();
    return;
  }
  if (!out_.empty()) WriteFront();
}

void QueuedStream::OnStarted(bool ok) {
  starting_ = false;
  // StartCall and the writes share gRPC's operation set: the first write
  // follows the start.
  WriteNext(ok);
}

void QueuedStream::OnWritten(bool ok) {
  writing_ = false;
  out_.pop_front();
  WriteNext(ok);
}

void QueuedStream::OnRead(bool ok) {
  reading_ = false;
  if (!ok) {
    finishing_ = true;
    call_->Finish(&status_, &finished_);
    return;
  }
  if (read_error_.ok()) {
    absl::Status s = reader_(in_);
    if (!s.ok()) {
      read_error_ = std::move(s);
      context_->TryCancel();
    }
  }
  // Read on until the call's end, also after a refusal (then it is the
  // cancelled call's end that the read hears).
  reading_ = true;
  call_->Read(&in_, &read_);
}

void QueuedStream::OnFinished(bool) {
  finishing_ = false;
  absl::Status result =
      !read_error_.ok() ? std::move(read_error_) : FromGrpcStatus(status_);
  if (done_) {
    std::function<void(absl::Status)> done = std::move(done_);
    done_ = nullptr;
    done(std::move(result));
  }
}

}  // namespace paramd
