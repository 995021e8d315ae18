// QueuedStream: one call whose request messages are all known when it
// starts — a PushStream or PullStream of a shard's chunks, or a unary
// method's one request (on the wire a unary call is a stream of one
// message each way) — on gRPC's async API over a StepQueue that the
// waiting thread polls, like the steps' StepStream: no gRPC callback
// thread is started or woken for it. It writes the messages in order,
// half-closing with the last, hands each reply to a reader as it is
// polled in, and runs `done` once with how it ended.
//
// Thread-compatible: made, polled and destroyed by one thread.
#ifndef PARAMD_WORKER_RPC_QUEUED_STREAM_H_
#define PARAMD_WORKER_RPC_QUEUED_STREAM_H_

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/rpc/step_queue.h"

namespace paramd {

class QueuedStream {
 public:
  // Returns OK to go on reading, or an error that cancels the call.
  using Reader = std::function<absl::Status(const grpc::ByteBuffer&)>;

  // Starts `method` on `stub` over `queue` (both outlive this) with
  // `context` (its deadline and metadata; outlives this) and sends
  // `messages` (at least one). `done` runs once, from the queue's Poll:
  // with the reader's error if it refused a reply, else the call's status.
  QueuedStream(grpc::GenericStub* stub, grpc::ClientContext* context,
               const std::string& method,
               std::vector<grpc::ByteBuffer> messages, Reader reader,
               std::function<void(absl::Status)> done, StepQueue* queue);
  // Cancels a call not over yet and polls the queue until gRPC is done
  // with it (running other calls' events that come meanwhile); `done`
  // then runs, if it had not.
  ~QueuedStream();
  QueuedStream(const QueuedStream&) = delete;
  QueuedStream& operator=(const QueuedStream&) = delete;

 private:
  using Event = StepQueue::Event<QueuedStream>;

  void OnStarted(bool ok);
  void OnWritten(bool ok);
  void OnRead(bool ok);
  void OnFinished(bool ok);
  // Writes the front of out_ (the last with a half-close).
  void WriteFront();
  // After the call's start or a write: the next write, if any, or none
  // ever again when `ok` is false.
  void WriteNext(bool ok);
  // The call's operations still on the queue.
  bool busy() const { return starting_ || writing_ || reading_ || finishing_; }

  grpc::ClientContext* const context_;
  StepQueue* const queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  Event started_{this, &QueuedStream::OnStarted};
  Event wrote_{this, &QueuedStream::OnWritten};
  Event read_{this, &QueuedStream::OnRead};
  Event finished_{this, &QueuedStream::OnFinished};
  std::deque<grpc::ByteBuffer> out_;  // The write in flight, then the rest.
  grpc::ByteBuffer in_;
  grpc::Status status_;
  Reader reader_;
  absl::Status read_error_;  // The reader's refusal, which ended the call.
  std::function<void(absl::Status)> done_;
  // Operations on the queue: StartCall, a Write, a Read, Finish.
  bool starting_ = true, writing_ = false, reading_ = true, finishing_ = false;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_QUEUED_STREAM_H_
