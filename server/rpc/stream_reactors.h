// PushStreamReactor and PullStreamReactor: the PushStream and PullStream
// calls (proto/paramd.proto; a worker's overlapped exchange,
// worker.overlap) served on gRPC's async API by the server's polling
// thread, as StepStream is (server/rpc/step_stream_reactor.h), so that
// neither holds a server thread for its life: a PushStream's messages are
// checked as each is read and the push applied when the worker half-closes
// the stream (not when a cancel or a passed deadline ends it); a
// PullStream's pull waits in the shard without a thread and its messages
// are written from the thread whose push made it readable.
// With testing faults set the threaded handlers serve them instead (a
// shaped link and a delayed reply hold the serving thread).
//
// Each deletes itself when its call is done.
#ifndef PARAMD_SERVER_RPC_STREAM_REACTORS_H_
#define PARAMD_SERVER_RPC_STREAM_REACTORS_H_

#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/rpc/async_calls.h"
#include "server/rpc/grpc_services.h"
#include "server/rpc/push_pieces.h"
#include "server/rpc/waiting_pull.h"

namespace paramd {

class PushStreamReactor final : public AsyncReaderCall {
 public:
  // Waits for a PushStream call (Listen). `service` and `queue` outlive it.
  PushStreamReactor(GrpcParameterService* service, AsyncCallQueue* queue);

 private:
  void OnStart() override;
  void OnReadDone(bool ok) override;
  void OnCancel() override { cancelled_ = true; }
  // The stream ended: applies the push unless it was cut off.
  void OnSettled() override;
  AsyncCall* Next() override {
    return new PushStreamReactor(service_, queue());
  }

  GrpcParameterService* const service_;
  grpc::ByteBuffer message_;
  PushPieces push_;
  bool cancelled_ = false;  // Events run on the queue's one thread.
};

class PullStreamReactor final : public AsyncWriterCall {
 public:
  // Waits for a PullStream call (Listen). `service` and `queue` outlive it.
  PullStreamReactor(GrpcParameterService* service, AsyncCallQueue* queue);

 private:
  void OnStart() override;
  // The pull ended: writes its messages, or ends the call.
  void Pulled(absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot,
              bool half, int64_t message_bytes);
  void OnWriteDone(bool ok) override;
  // A pull still waiting ends with CANCELLED, and with it the call.
  void OnCancel() override { pull_.Cancel(); }
  AsyncCall* Next() override {
    return new PullStreamReactor(service_, queue());
  }

  GrpcParameterService* const service_;
  WaitingPull pull_;
  // Written one after another; the next to write.
  std::vector<grpc::ByteBuffer> parts_;
  size_t next_part_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_STREAM_REACTORS_H_
