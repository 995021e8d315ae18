// Streaming RPCs through a grpc::GenericStub, driven by gRPC's callback
// API: messages go out in order, each received message goes to a reader as
// it arrives (on a gRPC thread, while later messages are still on the
// wire), and the caller hears once how the call ended. Works for client-,
// server- and bidirectional-streaming methods alike: on the wire they are
// the same.
//
// Only the overlapped exchange (worker.overlap, overlap_exchange.h) calls
// this way: its push goes out piece by piece while the training thread
// computes, and gRPC's async API moves a call's bytes only while a thread
// polls its queue, which the callback API's own threads do. Every other
// call of a worker is on the async API, polled by the thread that waits
// on it (step_stream.h, queued_stream.h).
#ifndef PARAMD_WORKER_RPC_STREAM_CALL_H_
#define PARAMD_WORKER_RPC_STREAM_CALL_H_

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/client_callback.h>

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace paramd {

// StreamCall::Start: a streaming call whose messages are all known when it
// starts (an OpenStream given them all at once).
struct StreamCall {
  // Returns OK to go on reading, or an error that cancels the call.
  using Reader = std::function<absl::Status(const grpc::ByteBuffer&)>;

  // Starts the call, sends `messages` (at least one) in order and
  // half-closes; `done` runs exactly once, on a gRPC thread, with the
  // reader's error if it refused a message, else the call's status.
  // `context` must outlive `done` (cancel the call through it).
  static void Start(grpc::GenericStub* stub, grpc::ClientContext* context,
                    const std::string& method,
                    std::vector<grpc::ByteBuffer> messages, Reader reader,
                    std::function<void(absl::Status)> done);
};

// OpenStream: a streaming RPC whose messages are not all known when it
// starts (worker.overlap sends a push piece by piece). Write queues each
// message (one is on the wire at a time) from any thread; the last one
// half-closes. Replies go to the reader as in StreamCall; `done` runs
// exactly once. After Write(..., last=true) or Abandon the handle must not
// be used again (the call deletes itself once it is over).
class OpenStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  static OpenStream* Start(grpc::GenericStub* stub,
                           grpc::ClientContext* context,
                           const std::string& method, StreamCall::Reader reader,
                           std::function<void(absl::Status)> done);

  void Write(grpc::ByteBuffer message, bool last) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the call (it ends with CANCELLED unless already over).
  void Abandon();

 private:
  OpenStream(grpc::ClientContext* context, StreamCall::Reader reader,
             std::function<void(absl::Status)> done);

  // Starts the queue's first write.
  void WriteFront() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  grpc::ClientContext* const context_;
  absl::Mutex mu_;
  std::deque<std::pair<grpc::ByteBuffer, bool>> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer incoming_;
  StreamCall::Reader reader_;
  absl::Status read_error_;  // Touched by the read path only.
  std::function<void(absl::Status)> done_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_STREAM_CALL_H_
