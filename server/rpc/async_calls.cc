#include "server/rpc/async_calls.h"

#include <cstdlib>
#include <utility>

#include "spdlog/spdlog.h"

namespace paramd {

AsyncCallQueue::AsyncCallQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq)
    : cq_(std::move(cq)) {}

AsyncCallQueue::~AsyncCallQueue() { Shutdown(); }

void AsyncCallQueue::Start(const std::vector<AsyncCall*>& first) {
  for (AsyncCall* call : first) call->Listen();
  thread_ = std::thread([this] { RunEvents(); });
}

void AsyncCallQueue::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (!open_ && !thread_.joinable()) return;
    open_ = false;
    // Every call ends: the server's shutdown cancelled those still open
    // (each handler finishes a cancelled call) and failed those asked for.
    auto over = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ == 0; };
    if (thread_.joinable()) mu_.Await(absl::Condition(&over));
  }
  // The calls still asked for come back failed; then Next ends.
  cq_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {
    RunEvents();
  }
}

void AsyncCallQueue::RunEvents() {
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) static_cast<AsyncCall::Tag*>(tag)->Done(ok);
}

bool AsyncCallQueue::open() {
  absl::MutexLock lock(&mu_);
  return open_;
}

void AsyncCallQueue::Added() {
  absl::MutexLock lock(&mu_);
  ++calls_;
}

void AsyncCallQueue::Removed() {
  absl::MutexLock lock(&mu_);
  --calls_;
}

void AsyncCall::Listen() {
  // gRPC returns done_tag_ once the call is over, finished or cancelled
  // (only for a call that came).
  context_.AsyncNotifyWhenDone(&done_tag_);
  queue_->Added();
  Request(&came_);
}

AsyncCall::Hold::Hold(AsyncCall* call) : call_(call) {
  absl::MutexLock lock(&call_->mu_);
  ++call_->holds_;
}

AsyncCall::Hold::~Hold() {
  bool over;
  {
    absl::MutexLock lock(&call_->mu_);
    --call_->holds_;
    over = call_->Over();
  }
  if (over) call_->End();
}

void AsyncCall::StartRead(grpc::ByteBuffer* message) {
  absl::MutexLock lock(&mu_);
  if (finish_asked_ || reading_) return;
  reading_ = true;
  Read(message, &read_);
}

void AsyncCall::StartWrite(const grpc::ByteBuffer* message) {
  absl::MutexLock lock(&mu_);
  if (finish_asked_ || writing_) return;
  writing_ = true;
  Write(*message, &written_);
}

void AsyncCall::Alarm(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (alarm_set_) return;
  alarm_set_ = true;
  // An alarm already due is queued behind what the queue holds now.
  alarm_.Set(queue_->cq(),
             gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                          gpr_time_from_micros(
                              absl::ToInt64Microseconds(delay), GPR_TIMESPAN)),
             &alarm_tag_);
}

void AsyncCall::CancelAlarm() {
  absl::MutexLock lock(&mu_);
  if (alarm_set_) alarm_.Cancel();
}

void AsyncCall::Finish(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  if (finish_asked_) return;
  finish_asked_ = true;
  // The status and a message may not be sent at once: after the write.
  if (writing_) {
    finish_after_write_ = status;
    return;
  }
  SendStatus(status, &status_sent_tag_);
}

void AsyncCall::Handle(Event event, bool ok) {
  switch (event) {
    case Event::kCame:
      if (!ok) {
        // The server shuts down: no call came, nothing else will.
        End();
        return;
      }
      if (queue_->open()) Next()->Listen();
      OnStart();
      break;
    case Event::kRead: {
      {
        absl::MutexLock lock(&mu_);
        reading_ = false;
      }
      OnReadDone(ok);
      break;
    }
    case Event::kWritten: {
      {
        absl::MutexLock lock(&mu_);
        writing_ = false;
        if (finish_after_write_.has_value()) {
          SendStatus(*finish_after_write_, &status_sent_tag_);
          finish_after_write_.reset();
        }
      }
      OnWriteDone(ok);
      break;
    }
    case Event::kStatusSent: {
      absl::MutexLock lock(&mu_);
      status_sent_ = true;
      break;
    }
    case Event::kDone: {
      {
        absl::MutexLock lock(&mu_);
        done_ = true;
      }
      if (context_.IsCancelled()) OnCancel();
      break;
    }
    case Event::kAlarm: {
      {
        absl::MutexLock lock(&mu_);
        alarm_set_ = false;
      }
      OnAlarm();
      break;
    }
  }
  bool over;
  {
    absl::MutexLock lock(&mu_);
    over = Over();
  }
  if (over) End();
}

bool AsyncCall::Over() {
  if (ended_ || !done_ || !status_sent_ || reading_ || writing_ || alarm_set_ ||
      holds_ > 0) {
    return false;
  }
  ended_ = true;
  return true;
}

void AsyncCall::End() {
  AsyncCallQueue* const queue = queue_;
  delete this;
  queue->Removed();
}

void AsyncBidiCall::Request(void* tag) {
  methods()->RequestCall(method(), context(), &stream_, nullptr, queue()->cq(),
                         tag);
}
void AsyncBidiCall::Read(grpc::ByteBuffer* message, void* tag) {
  stream_.Read(message, tag);
}
void AsyncBidiCall::Write(const grpc::ByteBuffer& message, void* tag) {
  stream_.Write(message, tag);
}
void AsyncBidiCall::SendStatus(const grpc::Status& status, void* tag) {
  stream_.Finish(status, tag);
}

void AsyncReaderCall::Request(void* tag) {
  methods()->RequestCall(method(), context(), &stream_, nullptr, queue()->cq(),
                         tag);
}
void AsyncReaderCall::Read(grpc::ByteBuffer* message, void* tag) {
  stream_.Read(message, tag);
}
void AsyncReaderCall::Write(const grpc::ByteBuffer&, void*) {
  spdlog::critical("a client-streaming call has no writes");
  std::abort();
}
void AsyncReaderCall::SendStatus(const grpc::Status& status, void* tag) {
  if (status.ok()) {
    stream_.Finish(response_, status, tag);
  } else {
    stream_.FinishWithError(status, tag);
  }
}

void AsyncWriterCall::Request(void* tag) {
  methods()->RequestCall(method(), context(), &stream_, &request_,
                         queue()->cq(), tag);
}
void AsyncWriterCall::Read(grpc::ByteBuffer*, void*) {
  spdlog::critical("a server-streaming call has no reads");
  std::abort();
}
void AsyncWriterCall::Write(const grpc::ByteBuffer& message, void* tag) {
  stream_.Write(message, tag);
}
void AsyncWriterCall::SendStatus(const grpc::Status& status, void* tag) {
  stream_.Finish(status, tag);
}

}  // namespace paramd
