// StepStream: one shard's long-lived StepStream call (proto/paramd.proto):
// each step writes its push — one PushRequest, or several linked by
// PushRequest.more — and hands the PullResponse messages that answer it to
// a PullSink until every chunk of the shard has arrived. The call stays
// open from step to step, so a step costs no call setup; once it ends (a
// refused step, a lost server, Cancel) the client opens a new one.
//
// Step is called by one thread at a time, for one step at a time; gRPC's
// threads deliver replies.
#ifndef PARAMD_WORKER_RPC_STEP_STREAM_H_
#define PARAMD_WORKER_RPC_STEP_STREAM_H_

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/client_callback.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/rpc/pull_sink.h"

namespace paramd {

class StepStream final
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Opens the call on `stub` (which outlives this). `context` carries the
  // call's metadata (the job token); it has no deadline.
  StepStream(grpc::GenericStub* stub, const std::string& method,
             std::unique_ptr<grpc::ClientContext> context);
  // Cancels the call and waits until gRPC is done with it.
  ~StepStream() override;

  // Sends `messages` (one push); its reply goes to `sink`. `done` runs
  // once: on a gRPC thread with the reply's or the call's status, or here
  // when the call is over already. `written`, unless null, receives the
  // time gRPC reported the last message written (before `done` runs, or
  // not at all when the call was over); at the latest when the reply
  // comes.
  void Step(std::vector<grpc::ByteBuffer> messages, PullSink* sink,
            std::function<void(absl::Status)> done,
            absl::Time* written = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the call ended: steps fail at once; open a new one.
  bool over() const ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the call (a step in flight fails with CANCELLED).
  void Cancel() { context_->TryCancel(); }

 private:
  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  // Lets OnDone come (once the read side is over, or on destruction).
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  std::unique_ptr<grpc::ClientContext> context_;
  grpc::ByteBuffer in_;
  mutable absl::Mutex mu_;
  struct Write {
    grpc::ByteBuffer message;
    absl::Time* written = nullptr;  // Where its write time goes, if anywhere.
  };
  // The write in flight (the front, while writing_) and those after it,
  // of this step and (its reply came before gRPC reported the last write
  // done) the next. A deque: an element stays where it is while others
  // are added, so gRPC may read the front outside the lock.
  std::deque<Write> out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  PullSink* sink_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::function<void(absl::Status)> done_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = true;
  bool over_ ABSL_GUARDED_BY(mu_) = false;      // No more steps.
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // OnDone returned.
  absl::Status end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_STEP_STREAM_H_
