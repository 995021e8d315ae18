// PushStreamReactor and PullStreamReactor: the PushStream and PullStream
// calls (proto/paramd.proto; a worker's overlapped exchange,
// worker.overlap) served with gRPC's callback API, as StepStream is
// (server/rpc/step_stream_reactor.h), so that neither holds a server
// thread for its life: a PushStream's messages are checked on the gRPC
// thread that read each and the push applied on the one that saw the
// stream end; a PullStream's pull waits in the shard without a thread and
// its messages are written from the thread whose push made it readable.
// With testing faults set the threaded handlers serve them instead (a
// shaped link and a delayed reply hold the serving thread).
//
// Each deletes itself when its call is done.
#ifndef PARAMD_SERVER_RPC_STREAM_REACTORS_H_
#define PARAMD_SERVER_RPC_STREAM_REACTORS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/rpc/grpc_services.h"
#include "server/rpc/push_pieces.h"
#include "server/rpc/waiting_pull.h"

namespace paramd {

class PushStreamReactor final
    : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // `service` outlives it; the PushResponse goes to `response`.
  PushStreamReactor(GrpcParameterService* service,
                    grpc::CallbackServerContext* context,
                    grpc::ByteBuffer* response);

 private:
  void OnReadDone(bool ok) override;
  void OnDone() override { delete this; }

  GrpcParameterService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer message_;
  PushPieces push_;
};

class PullStreamReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `service` outlives it.
  PullStreamReactor(GrpcParameterService* service,
                    grpc::CallbackServerContext* context,
                    const grpc::ByteBuffer* request);

 private:
  // The pull ended: writes its messages, or ends the call.
  void Pulled(absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot,
              bool half, int64_t message_bytes);
  void OnWriteDone(bool ok) override;
  // A pull still waiting ends with CANCELLED, and with it the call.
  void OnCancel() override { pull_.Cancel(); }
  void OnDone() override { delete this; }

  GrpcParameterService* const service_;
  WaitingPull pull_;
  // Written one after another; the next to write.
  std::vector<grpc::ByteBuffer> parts_;
  size_t next_part_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_STREAM_REACTORS_H_
