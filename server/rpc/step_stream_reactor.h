// StepStreamReactor: one StepStream call (proto/paramd.proto) served with
// gRPC's callback API, so that a server's threads do not grow with the
// workers × shards streams open. Each message read is a push, applied on
// the gRPC thread that read it; the pull of its clock + 1 then waits in
// the shard without a thread (Shard::StartPull), and its reply is written
// from the thread whose push made it readable (under sync: the round's
// last push); the next message is read once the reply is sent. One step at
// a time, in order, as before. A failed step ends the call with its status
// (the client opens a new stream); a cancelled call ends its waiting pull.
//
// Thread-safe: gRPC's callbacks and the shard's run on any thread.
#ifndef PARAMD_SERVER_RPC_STEP_STREAM_REACTOR_H_
#define PARAMD_SERVER_RPC_STEP_STREAM_REACTOR_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/rpc/grpc_services.h"

namespace paramd {

class StepStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts serving the call (or ends it: a missing or wrong token);
  // deletes itself when the call is done. `service` outlives it.
  StepStreamReactor(GrpcParameterService* service,
                    grpc::CallbackServerContext* context);

 private:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

  // The push in request_ is applied; starts the pull of `clock`.
  void StartPull(const proto::PullRequest& pull);
  // A step's pull ended: writes its reply, or ends the call.
  void Pulled(absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot,
              bool half);
  // Ends the step and the call with `s`.
  void EndStep(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the call with `s`, once; only outside a step.
  void End(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);

  GrpcParameterService* const service_;
  grpc::ByteBuffer request_, reply_;
  // The step's pull for the timeline: rank and clock, and when its reply
  // began (InfinitePast untraced). Set before the reply's write starts,
  // read when it is done.
  int traced_rank_ = 0;
  uint64_t traced_clock_ = 0;
  absl::Time reply_begin_ = absl::InfinitePast();
  absl::Mutex mu_;
  // From a push read to its reply's write: the call is ended (Finish) only
  // outside a step, so no pull in the shard outlives the reactor.
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;
  bool pulled_ ABSL_GUARDED_BY(mu_) = false;  // The step's pull ended.
  uint64_t pull_ ABSL_GUARDED_BY(mu_) = 0;    // Its handle while it waits.
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_STEP_STREAM_REACTOR_H_
