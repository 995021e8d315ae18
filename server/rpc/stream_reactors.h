// PushStreamReactor and PullStreamReactor: the PushStream and PullStream
// calls (proto/paramd.proto; a worker's push without a pull, and its pulls,
// where a shard fills several messages) served on gRPC's async API by the
// server's polling thread, as StepStream is
// (server/rpc/step_stream_reactor.h), so that
// neither holds a server thread for its life: a PushStream's messages are
// checked as each is read and the push applied when the worker half-closes
// the stream (not when a cancel or a passed deadline ends it); a
// PullStream's pull waits in the shard without a thread and its messages
// are written from the thread whose push made it readable.
// The testing section's reply faults act here too: a reply held back waits
// on the call's alarm.
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

class PushStreamReactor final : public AsyncCall {
 public:
  // Serves the PushStream call in `slot`. `service` and `queue` outlive it.
  PushStreamReactor(GrpcParameterService* service, AsyncCallQueue* queue,
                    std::unique_ptr<CallSlot> slot);

 private:
  void OnStart() override;
  void OnReadDone(bool ok) override;
  void OnCancel() override {
    cancelled_ = true;
    CancelAlarm();
  }
  // The stream ended: applies the push unless it was cut off; then, after
  // a reply held back by the testing faults, answers.
  void OnAlarm() override;

  GrpcParameterService* const service_;
  grpc::ByteBuffer message_;
  grpc::ByteBuffer reply_;  // The PushResponse, once decided.
  PushPieces push_;
  // Events run on the queue's one thread.
  bool cancelled_ = false;
  bool decided_ = false;  // The push was applied (or refused).
  absl::Status lost_;     // The reply, lost on purpose (testing).
};

class PullStreamReactor final : public AsyncCall {
 public:
  // Serves the PullStream call in `slot`. `service` and `queue` outlive it.
  PullStreamReactor(GrpcParameterService* service, AsyncCallQueue* queue,
                    std::unique_ptr<CallSlot> slot);

 private:
  void OnStart() override;
  // The call's one PullRequest came: starts the pull.
  void OnReadDone(bool ok) override;
  // The pull ended: writes its messages, or ends the call.
  void Pulled(absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot,
              bool half, int64_t message_bytes);
  void OnWriteDone(bool ok) override;
  // The reply, after the testing faults held it back: lost, or written.
  void OnAlarm() override;
  // A pull still waiting ends with CANCELLED, and with it the call.
  void OnCancel() override {
    pull_.Cancel();
    CancelAlarm();
  }

  GrpcParameterService* const service_;
  WaitingPull pull_;
  grpc::ByteBuffer request_;
  // Written one after another; the next to write.
  std::vector<grpc::ByteBuffer> parts_;
  size_t next_part_ = 0;
  absl::Status lost_;  // The reply, lost on purpose (testing).
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_STREAM_REACTORS_H_
