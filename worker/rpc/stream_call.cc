#include "worker/rpc/stream_call.h"

#include "common/rpc/grpc_status.h"

namespace paramd {

void StreamCall::Start(grpc::GenericStub* stub, grpc::ClientContext* context,
                       const std::string& method,
                       std::vector<grpc::ByteBuffer> messages, Reader reader,
                       std::function<void(absl::Status)> done) {
  OpenStream* call = OpenStream::Start(stub, context, method, std::move(reader),
                                       std::move(done));
  // The last Write hands the call over to gRPC: `call` is not used after.
  for (size_t i = 0; i < messages.size(); ++i) {
    call->Write(std::move(messages[i]), i + 1 == messages.size());
  }
}

OpenStream* OpenStream::Start(grpc::GenericStub* stub,
                              grpc::ClientContext* context,
                              const std::string& method,
                              StreamCall::Reader reader,
                              std::function<void(absl::Status)> done) {
  auto* call = new OpenStream(context, std::move(reader), std::move(done));
  stub->PrepareBidiStreamingCall(context, method, grpc::StubOptions(), call);
  // Writes start from outside gRPC's reactions: the hold keeps the call
  // (and this object) until the last one is queued or it is abandoned.
  call->AddHold();
  call->StartRead(&call->incoming_);
  call->StartCall();
  return call;
}

OpenStream::OpenStream(grpc::ClientContext* context, StreamCall::Reader reader,
                       std::function<void(absl::Status)> done)
    : context_(context), reader_(std::move(reader)), done_(std::move(done)) {}

void OpenStream::Write(grpc::ByteBuffer message, bool last) {
  {
    absl::MutexLock lock(&mu_);
    if (!failed_) {
      queue_.emplace_back(std::move(message), last);
      if (!writing_) WriteFront();
    }
  }
  // Last: from here on only gRPC's reactions touch the call.
  if (last) RemoveHold();
}

void OpenStream::Abandon() {
  context_->TryCancel();
  RemoveHold();
}

void OpenStream::WriteFront() {
  writing_ = true;
  auto& [message, last] = queue_.front();
  if (last) {
    StartWriteLast(&message, grpc::WriteOptions());
  } else {
    StartWrite(&message);
  }
}

void OpenStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  queue_.pop_front();
  writing_ = false;
  if (!ok) {
    // The call is over (OnDone says why): nothing more goes out.
    failed_ = true;
    queue_.clear();
    return;
  }
  if (!queue_.empty()) WriteFront();
}

void OpenStream::OnReadDone(bool ok) {
  if (!ok) return;
  absl::Status s = reader_(incoming_);
  if (!s.ok()) {
    read_error_ = std::move(s);
    context_->TryCancel();
    return;
  }
  StartRead(&incoming_);
}

void OpenStream::OnDone(const grpc::Status& status) {
  std::function<void(absl::Status)> done = std::move(done_);
  absl::Status result =
      !read_error_.ok() ? std::move(read_error_) : FromGrpcStatus(status);
  delete this;
  done(std::move(result));
}

}  // namespace paramd
