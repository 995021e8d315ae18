#include "server/rpc/async_calls.h"

#include <utility>

namespace paramd {

namespace {

// Calls asked for at any time: more than one, so that a burst of calls
// (every worker's streams at a job's start) does not wait on the queue's
// thread for each to be asked for.
constexpr int kCallsAskedFor = 4;

}  // namespace

void CallSlot::Done::Run(bool ok) { call->Handle(AsyncCall::Event::kDone, ok); }

void CallSlot::Came::Run(bool ok) { queue->Came(slot, ok); }

AsyncCallQueue::AsyncCallQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq,
                               grpc::AsyncGenericService* service)
    : cq_(std::move(cq)), service_(service) {}

AsyncCallQueue::~AsyncCallQueue() { Shutdown(); }

void AsyncCallQueue::Start(MakeCall make) {
  make_ = std::move(make);
  for (int i = 0; i < kCallsAskedFor; ++i) Listen();
  thread_ = std::thread([this] { RunEvents(); });
}

void AsyncCallQueue::Listen() {
  {
    absl::MutexLock lock(&mu_);
    if (!open_) return;
    ++calls_;
  }
  auto* slot = new CallSlot;
  slot->came_.queue = this;
  slot->came_.slot = slot;
  slot->context_.AsyncNotifyWhenDone(&slot->done_);
  service_->RequestCall(&slot->context_, &slot->stream_, cq_.get(), cq_.get(),
                        &slot->came_);
}

void AsyncCallQueue::Came(CallSlot* slot, bool ok) {
  std::unique_ptr<CallSlot> owned(slot);
  if (!ok) {
    // The server shuts down: no call came, nothing else will.
    owned.reset();
    Removed();
    return;
  }
  Listen();
  AsyncCall* call = make_(this, std::move(owned));
  call->OnStart();
  call->EndIfOver();
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
  while (cq_->Next(&tag, &ok)) static_cast<QueueEvent*>(tag)->Run(ok);
}

void AsyncCallQueue::Removed() {
  absl::MutexLock lock(&mu_);
  --calls_;
}

AsyncCall::AsyncCall(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot)
    : queue_(queue), slot_(std::move(slot)) {
  slot_->done_.call = this;
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
  slot_->stream_.Read(message, &read_);
}

void AsyncCall::StartWrite(const grpc::ByteBuffer* message) {
  absl::MutexLock lock(&mu_);
  if (finish_asked_ || writing_) return;
  writing_ = true;
  slot_->stream_.Write(*message, &written_);
}

void AsyncCall::Alarm(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (alarm_set_) return;
  alarm_set_ = true;
  // An alarm already due is queued behind what the queue holds now.
  alarm_.Set(queue_->cq(),
             gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                          gpr_time_from_micros(absl::ToInt64Microseconds(delay),
                                               GPR_TIMESPAN)),
             &alarm_tag_);
}

void AsyncCall::HoldReply(const ReplyFaults& faults, const char* rpc,
                          absl::Status* lost) {
  ReplyFaults::Fate fate = faults.Draw(rpc);
  *lost = std::move(fate.lost);
  if (fate.delay > absl::ZeroDuration()) {
    Alarm(fate.delay);
    return;
  }
  OnAlarm();
}

void AsyncCall::CancelAlarm() {
  absl::MutexLock lock(&mu_);
  if (alarm_set_) alarm_.Cancel();
}

void AsyncCall::Finish(const grpc::Status& status,
                       std::optional<grpc::ByteBuffer> reply) {
  absl::MutexLock lock(&mu_);
  if (finish_asked_) return;
  finish_asked_ = true;
  if (status.ok()) reply_ = std::move(reply);
  // The status and a message may not be sent at once: after the write.
  if (writing_) {
    finish_after_write_ = status;
    return;
  }
  SendStatus(status);
}

void AsyncCall::SendStatus(const grpc::Status& status) {
  if (reply_.has_value()) {
    slot_->stream_.WriteAndFinish(*reply_, grpc::WriteOptions(), status,
                                  &status_sent_tag_);
  } else {
    slot_->stream_.Finish(status, &status_sent_tag_);
  }
}

void AsyncCall::Handle(Event event, bool ok) {
  switch (event) {
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
          SendStatus(*finish_after_write_);
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
      if (slot_->context_.IsCancelled()) OnCancel();
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
  EndIfOver();
}

void AsyncCall::EndIfOver() {
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

}  // namespace paramd
