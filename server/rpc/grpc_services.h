// gRPC adapters over a Shard: each handler calls the shard, converts the
// status, replies. No policy or optimizer logic lives here.
#ifndef PARAMD_SERVER_RPC_GRPC_SERVICES_H_
#define PARAMD_SERVER_RPC_GRPC_SERVICES_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <vector>

#include "common/rpc/credentials.h"
#include "proto/paramd.grpc.pb.h"
#include "server/faults/reply_faults.h"
#include "server/rpc/async_calls.h"
#include "server/rpc/served_methods.h"
#include "server/shard/shard.h"

namespace paramd {

// proto::ParameterService, served on raw bytes (server/rpc/served_methods.h)
// rather than by the generated base class so that Push and Pull can keep tensor
// bytes out of protobuf messages (common/wire/wire_format.h): a push is decoded
// from the received slices, copying each chunk at most once, and a pull's reply
// references the shard's snapshot of the version in place, so one copy of
// a version serves every worker that pulls it. On the wire these are
// PushRequest/PullResponse, so any protobuf client can call them; the
// other methods use the protobuf messages as generated. Every method
// checks the job token first (UNAUTHENTICATED without it).
// The message size a PullStream's reply is cut at: its
// stream_message_bytes, or kStreamMessageBytes when unset.
int64_t PullStreamMessageBytes(const proto::PullRequest& pull);

class GrpcParameterService final {
 public:
  // Every call must carry `security`'s token (when it has one); `security`
  // is read only while serving and must outlive the service, as must
  // `faults` (the job's testing section: replies held back and lost).
  GrpcParameterService(Shard* shard, const JobSecurity* security,
                       const ReplyFaults* faults);

  // "/paramd.proto.ParameterService/<rpc>".
  static std::string MethodName(const char* rpc);

  // Adds the service's methods to `methods`. The streams are served
  // without a thread per stream by the reactors (StepStreamReactor,
  // PushStreamReactor, PullStreamReactor); this object outlives them.
  void AddTo(ServedMethods* methods);

 private:
  // Serve the streams without a thread per stream; use the parts below and
  // the shard.
  friend class StepStreamReactor;
  // Likewise PushStream and PullStream (server/rpc/stream_reactors.h).
  friend class PushStreamReactor;
  friend class PullStreamReactor;

  grpc::Status DeclareModel(grpc::ServerContext* context,
                            const grpc::ByteBuffer* request,
                            grpc::ByteBuffer* response);
  grpc::Status Register(grpc::ServerContext* context,
                        const grpc::ByteBuffer* request,
                        grpc::ByteBuffer* response);
  grpc::Status Push(grpc::ServerContext* context,
                    const grpc::ByteBuffer* request,
                    grpc::ByteBuffer* response);
  grpc::Status PushPull(grpc::ServerContext* context, Cancellation* cancel,
                        const grpc::ByteBuffer* request,
                        grpc::ByteBuffer* response);
  // A PushPull's work: applies the push in `request`, then waits for the
  // pull of its clock + 1 and frames it into `response`.
  absl::Status PushThenPull(const char* rpc, grpc::ServerContext* context,
                            Cancellation* cancel,
                            const grpc::ByteBuffer& request,
                            grpc::ByteBuffer* response);
  grpc::Status Pull(grpc::ServerContext* context, Cancellation* cancel,
                    const grpc::ByteBuffer* request,
                    grpc::ByteBuffer* response);
  grpc::Status PullRows(grpc::ServerContext* context, Cancellation* cancel,
                        const grpc::ByteBuffer* request,
                        grpc::ByteBuffer* response);
  grpc::Status Initialize(grpc::ServerContext* context,
                          const grpc::ByteBuffer* request,
                          grpc::ByteBuffer* response);
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const grpc::ByteBuffer* request,
                         grpc::ByteBuffer* response);
  grpc::Status ReportEpoch(grpc::ServerContext* context,
                           const grpc::ByteBuffer* request,
                           grpc::ByteBuffer* response);

  // Checks and decodes the push in `request` (in place where it can) and
  // hands it to the shard's `apply` (Push; Initialize for rank 0's initial
  // values). Afterwards only `view`'s header fields are valid (its chunks
  // pointed into bytes freed on return). `rpc` names the call in errors.
  using PushHandler = absl::Status (Shard::*)(const PushView&,
                                              proto::PushResponse*);
  absl::Status ApplyPush(const char* rpc, const grpc::ByteBuffer& request,
                         PushView* view, proto::PushResponse* reply,
                         PushHandler apply = &Shard::Push);
  // Checks the size of a PullRequest and parses it into `*pull`.
  absl::Status ParsePull(const char* rpc, const grpc::ByteBuffer& request,
                         proto::PullRequest* pull);
  // Parses a PullRequest into `*pull` and waits until the shard serves
  // it.
  absl::Status WaitPull(grpc::ServerContext* context, Cancellation* cancel,
                        const char* rpc, const grpc::ByteBuffer& request,
                        std::shared_ptr<const ParamSnapshot>* snapshot,
                        proto::PullRequest* pull);
  // Waits until the shard serves `pull`, for as long as the call's
  // deadline allows and its client is there (until `cancel`).
  absl::Status AwaitPull(grpc::ServerContext* context, Cancellation* cancel,
                         const proto::PullRequest& pull,
                         std::shared_ptr<const ParamSnapshot>* snapshot);
  // A PullResponse with the snapshot's chunks [begin, end) (or their
  // halves), referenced in place.
  grpc::ByteBuffer PullFrame(
      const std::shared_ptr<const ParamSnapshot>& snapshot, size_t begin,
      size_t end, bool half) const;
  // The snapshot as PullResponse messages, each closed once it holds
  // `message_bytes` of chunk data (0: one message).
  std::vector<grpc::ByteBuffer> PullParts(
      const std::shared_ptr<const ParamSnapshot>& snapshot, bool half,
      int64_t message_bytes) const;
  // The snapshot's chunk bytes (or halves) written into a same-host
  // stream's `pull_area`, one after another, and the PullResponse that
  // says where each lies; PullParts when they do not fit.
  std::vector<grpc::ByteBuffer> PullInSegment(
      const std::shared_ptr<const ParamSnapshot>& snapshot, bool half,
      int64_t message_bytes, absl::Span<char> pull_area) const;

  // Adds the unary method `rpc`, served by `handler`; a `faulty` one's
  // replies are subject to the testing section's faults.
  template <typename Handler>
  void AddUnary(ServedMethods* methods, const char* rpc, Handler handler,
                bool faulty = false);
  // Adds the streaming method `rpc`, each call served by a new `Reactor`.
  template <typename Reactor>
  void AddReactor(ServedMethods* methods, const char* rpc);

  Shard* const shard_;
  const JobSecurity* const security_;
  const ReplyFaults* const faults_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_GRPC_SERVICES_H_
