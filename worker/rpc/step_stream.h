// StepStream: one shard's long-lived StepStream call (proto/paramd.proto):
// each step writes its push — one PushRequest, or several linked by
// PushRequest.more — and hands the PullResponse messages that answer it to
// a PullSink until every chunk of the shard has arrived. The call stays
// open from step to step, so a step costs no call setup; once it ends (a
// refused step, a lost server, Cancel) the client opens a new one.
//
// The call runs on gRPC's async API over a StepQueue: its events (a write
// done, a reply read, the call's end) run when the thread that waits on
// the step polls the queue, so a reply is consumed on that thread and no
// gRPC thread hands it over.
//
// Thread-compatible: Step, over and the destructor are called by the
// thread that polls the queue, for one step at a time; Cancel from any
// thread.
#ifndef PARAMD_WORKER_RPC_STEP_STREAM_H_
#define PARAMD_WORKER_RPC_STEP_STREAM_H_

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/step_queue.h"

namespace paramd {

class StepStream {
 public:
  // Opens the call on `stub` over `queue` (both outlive this). `context`
  // carries the call's metadata (the job token); it has no deadline.
  StepStream(grpc::GenericStub* stub, const std::string& method,
             std::unique_ptr<grpc::ClientContext> context, StepQueue* queue);
  // Cancels the call and polls the queue until gRPC is done with it
  // (running other calls' events that come meanwhile).
  ~StepStream();
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;

  // Sends `messages` (one push); its reply goes to `sink`. `done` runs
  // once: from the queue's Poll with the reply's or the call's status, or
  // here when the call is over already. `written`, unless null, receives
  // the time gRPC reported the last message written (before `done` runs,
  // or not at all when the call was over); at the latest when the reply
  // comes.
  void Step(std::vector<grpc::ByteBuffer> messages, PullSink* sink,
            std::function<void(absl::Status)> done,
            absl::Time* written = nullptr);
  // Writes `message` after the step's earlier ones: a later piece of its
  // push, for a push sent as it is made (the overlapped exchange). Nothing
  // is written once the step ended.
  void Append(grpc::ByteBuffer message);
  // Whether the call ended (as far as the events polled so far tell):
  // steps fail at once; open a new one.
  bool over() const { return over_ || !reading_; }
  // Ends the call (a step in flight fails with CANCELLED). Thread-safe.
  void Cancel() { context_->TryCancel(); }

 private:
  using Event = StepQueue::Event<StepStream>;

  void OnStarted(bool ok);
  void OnWritten(bool ok);
  void OnRead(bool ok);
  void OnFinished(bool ok);
  // Writes the front of out_.
  void WriteFront();
  // After the call's start or a write: the next write, if any, or none
  // ever again when `ok` is false.
  void WriteNext(bool ok);
  // Ends the step in flight, if any, with `s`.
  void EndStep(absl::Status s);
  // The call's operations still on the queue.
  bool busy() const { return starting_ || writing_ || reading_ || finishing_; }

  std::unique_ptr<grpc::ClientContext> context_;
  StepQueue* const queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  Event started_{this, &StepStream::OnStarted};
  Event wrote_{this, &StepStream::OnWritten};
  Event read_{this, &StepStream::OnRead};
  Event finished_{this, &StepStream::OnFinished};
  grpc::ByteBuffer in_;
  grpc::Status status_;
  struct Write {
    grpc::ByteBuffer message;
    absl::Time* written = nullptr;  // Where its write time goes, if anywhere.
  };
  // The write in flight (the front, while writing_) and those after it,
  // of this step and (its reply came before gRPC reported the last write
  // done) the next.
  std::deque<Write> out_;
  PullSink* sink_ = nullptr;
  std::function<void(absl::Status)> done_;
  // Operations on the queue: StartCall, a Write, a Read, Finish.
  bool starting_ = true, writing_ = false, reading_ = true, finishing_ = false;
  bool over_ = false;  // Finish returned: no more steps.
  absl::Status end_;   // Why the call ended, once over_.
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_STEP_STREAM_H_
