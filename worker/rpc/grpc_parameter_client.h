// GrpcParameterClient: the ParameterClient (worker/parameter_client.h)
// that talks to every shard over gRPC, concurrently.
//
// Tensor bytes stay out of protobuf messages (common/wire/wire_format.h): a
// push sends each chunk straight from the gradient buffer, and a pull copies
// each received chunk once, straight to its place in `params`. A shard
// whose chunks fill several messages (kStreamMessageBytes) is pushed and
// pulled through PushStream and PullStream (proto/paramd.proto), so each
// end works on one message while the next is on the wire; a smaller one
// through unary Push and Pull, which cost less per call. A step of a shard
// whose push and pull each fit one message is one PushPull, sent as a step
// of a StepStream that stays open across steps.
//
// Thread-compatible: one training loop uses it at a time.
#ifndef PARAMD_WORKER_RPC_GRPC_PARAMETER_CLIENT_H_
#define PARAMD_WORKER_RPC_GRPC_PARAMETER_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/rpc/credentials.h"
#include "proto/paramd.grpc.pb.h"
#include "worker/parameter_client.h"
#include "worker/rpc/overlap_exchange.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/push_frames.h"
#include "worker/rpc/step_stream.h"

namespace paramd {

struct GrpcClientOptions {
  // The launch to register as (RegisterRequest.launch).
  std::string launch;
  // How long Register waits for every server to come up.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Longest wait for one pull: under sync it spans the slowest worker's
  // step.
  absl::Duration pull_timeout = absl::Minutes(10);
  absl::Duration push_timeout = absl::Minutes(1);
  // A call no server answered (UNAVAILABLE, DEADLINE_EXCEEDED) is sent
  // again, with exponential backoff and jitter, for this long after its
  // first failure (liveness.give_up_seconds; the factory sets it).
  absl::Duration give_up = absl::Seconds(120);
  // What the retries' back-off reads and sleeps on (worker/retry.h); must
  // outlive the client.
  Clock* clock = RealClock();
  // A shard whose push and pull each fit one message: PushPull as a step
  // of a StepStream kept open across steps (no per-step call setup);
  // false: a unary PushPull call per step.
  bool step_stream = true;
};

class GrpcParameterClient final : public ParameterClient {
 public:
  // `addresses`: one "host:port" per shard, in shard order; channels use
  // `security`'s TLS and token.
  GrpcParameterClient(const ClientSetup& setup,
                      std::vector<std::string> addresses,
                      GrpcClientOptions options, const JobSecurity& security);

  absl::StatusOr<uint64_t> Register() override;
  absl::StatusOr<uint64_t> Pull(uint64_t clock,
                                absl::Span<float> params) override;
  // Moves to a new buffer while gRPC still holds the last one.
  absl::Span<float> GradientBuffer() override;
  absl::StatusOr<uint64_t> Push(uint64_t clock, absl::Span<const float> grads,
                                float loss) override;
  absl::StatusOr<uint64_t> PushPull(uint64_t clock,
                                    absl::Span<const float> grads, float loss,
                                    absl::Span<float> params) override;
  // worker.overlap: an OverlapExchange (worker/rpc/overlap_exchange.h)
  // when `grads` is the buffer GradientBuffer gave and no rows ride along;
  // else the default.
  std::unique_ptr<StepExchange> StartPushPull(
      uint64_t clock, absl::Span<const float> grads, float loss,
      absl::Span<float> params) override;
  // Row calls: worker/rpc/row_calls.cc.
  absl::Status PullRows(uint64_t clock, uint32_t table,
                        absl::Span<const uint64_t> ids,
                        absl::Span<float> out) override;
  void SetRowGradients(uint32_t table, absl::Span<const uint64_t> ids,
                       absl::Span<const float> grads) override;
  void Heartbeat(uint64_t clock, bool finished,
                 absl::Duration timeout) override;
  absl::Status ReportEpoch(const EpochReport& report) override;

 private:
  // Retry (worker/retry.h) with the client's give_up and clock.
  absl::StatusOr<uint64_t> Retrying(
      const char* what,
      const std::function<absl::StatusOr<uint64_t>()>& attempt);
  absl::StatusOr<uint64_t> PullOnce(uint64_t clock, absl::Span<float> params);
  absl::Status PullRowsOnce(uint64_t clock, uint32_t table,
                            absl::Span<const uint64_t> ids,
                            absl::Span<float> out);
  absl::StatusOr<uint64_t> PushOnce(uint64_t clock,
                                    absl::Span<const float> grads, float loss);
  absl::StatusOr<uint64_t> PushPullOnce(uint64_t clock,
                                        absl::Span<const float> grads,
                                        float loss, absl::Span<float> params);
  // One phase of Register on every shard; returns the largest clock.
  absl::StatusOr<uint64_t> RegisterPhase(bool join, uint64_t clock);
  // Each shard's push messages for `grads` computed at `clock` (one: a
  // unary Push; several: a PushStream), referencing the gradient buffer
  // (copying `grads` into it first unless they are already there).
  std::vector<std::vector<grpc::ByteBuffer>> PushMessages(
      uint64_t clock, absl::Span<const float> grads, float loss);
  grpc::ByteBuffer PullFrame(uint64_t clock) const;
  proto::PullRequest MakePullRequest(uint64_t clock,
                                     uint32_t message_bytes) const;
  // Starts one shard's pull or push: a stream when the shard's chunks fill
  // several messages, else a unary call. `done` runs on a gRPC thread when
  // it ends.
  void StartPull(int shard, uint64_t clock, grpc::ClientContext* context,
                 PullSink* sink, std::function<void(absl::Status)> done);
  // Starts one shard's PushPull (the push in one message, the pull of
  // clock + 1 back in one message) into `sink`, as a step of its
  // StepStream.
  void StartPushPull(int shard, grpc::ByteBuffer message, PullSink* sink,
                     std::function<void(absl::Status)> done);
  // Opens the shard's StepStream unless one is open.
  void OpenStepStream(int shard);
  // One PushPull step's calls to every shard and what they answer
  // (step_calls.cc).
  struct StepRound;
  // Starts every call of `round` with the push `messages` of `clock`.
  void StartStep(uint64_t clock,
                 std::vector<std::vector<grpc::ByteBuffer>> messages,
                 StepRound* round);
  // Cancels the step's pulls: after a refused push they would wait in vain.
  void CancelStepPulls(StepRound* round);
  // One unary call of `method` whose single reply goes to `sink`.
  void UnaryIntoSink(int shard, const std::string& method,
                     grpc::ByteBuffer message, grpc::ClientContext* context,
                     PullSink* sink, std::function<void(absl::Status)> done);
  void StartPush(int shard, std::vector<grpc::ByteBuffer> messages,
                 grpc::ClientContext* context, grpc::ByteBuffer* response,
                 std::function<void(absl::Status)> done);
  static std::chrono::system_clock::time_point DeadlineIn(absl::Duration d);
  // The version served: the smallest across shards.
  static absl::StatusOr<uint64_t> PulledVersion(
      const std::vector<PullSink>& sinks);

  struct ShardConn {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<proto::ParameterService::Stub> stub;
    std::unique_ptr<grpc::GenericStub> generic;
    // Whether pulls use PullStream: the shard's chunks fill several
    // messages.
    bool pull_streams = false;
    // The shard's StepStream, opened by the first PushPull that needs it
    // and again after it ended.
    std::unique_ptr<StepStream> steps;
  };

  const JobConfig& config_;
  const PartitionPlan* plan_;
  const FlatLayout* layout_;
  const int rank_;
  const bool pull_half_;  // compression.pull: fp16
  const GrpcClientOptions options_;
  const uint64_t incarnation_;  // Random, for this process.
  // Full method names, as gRPC calls them.
  const std::string push_method_, pull_method_, push_stream_method_,
      pull_stream_method_, push_pull_method_, pull_rows_method_,
      step_stream_method_;
  std::vector<ShardConn> shards_;
  PushFrames push_frames_;
  // Gradients are sent from here; gRPC (or an exchange) holds a reference
  // until sent. `spare_`: the buffer before, reused once released.
  std::shared_ptr<std::vector<float>> gradients_, spare_;
  bool has_rows_ = false;  // SetRowGradients was called.
  // The plan as overlapped exchanges look chunks up; made by the first.
  std::unique_ptr<OverlapIndex> overlap_index_;
};

// `s` with "<what><shard>: " before its message, e.g. "Push to shard 1: ".
absl::Status PrefixStatus(const absl::Status& s, const char* what, int shard);

// Runs `call(shard, done)` for every shard at once and waits for all; each
// call reports how it ended through `done`. Returns the first failure,
// naming the RPC and the shard.
absl::Status ForAllShards(
    int num_shards, const char* rpc,
    const std::function<void(int, std::function<void(absl::Status)>)>& call);

// Makes GrpcParameterClients for the shards at `servers` (one "host:port"
// per shard; empty: the job's cluster.servers).
ParameterClientFactory GrpcParameterClientFactory(
    std::vector<std::string> servers, GrpcClientOptions options = {});

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_GRPC_PARAMETER_CLIENT_H_
