// GrpcParameterClient: the ParameterClient (worker/parameter_client.h)
// that talks to every shard over gRPC, concurrently. Its collaborators:
// ShardLinks (the channels, and the pulls, pushes and PushPulls on them,
// worker/rpc/shard_links.h), a StepDriver (worker/step/step_driver.h)
// over StepCalls (one PushPull step to every shard), RowCalls (PullRows),
// OverlapExchange (worker.overlap) and PushFrames (a push's messages,
// straight from the gradient buffer). The client itself registers,
// retries what no server answered, and owns the gradient buffers gRPC
// sends from.
//
// Thread-compatible: one training loop uses it at a time.
#ifndef PARAMD_WORKER_RPC_GRPC_PARAMETER_CLIENT_H_
#define PARAMD_WORKER_RPC_GRPC_PARAMETER_CLIENT_H_

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
#include "worker/parameter_client.h"
#include "worker/rpc/overlap_exchange.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/push_frames.h"
#include "worker/rpc/row_calls.h"
#include "worker/rpc/shard_links.h"
#include "worker/rpc/step_calls.h"
#include "worker/step/step_driver.h"

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
  // replication.factor 2: each shard's backup (ShardLinks::Options).
  std::vector<std::string> backups;
  // cluster.servers {etcd: N}: where the servers are registered now
  // (ShardLinks::Options).
  std::function<absl::StatusOr<std::vector<std::string>>()> find_servers;
};

class GrpcParameterClient final : public ParameterClient {
 public:
  // `addresses`: one "host:port" per shard, in shard order; channels use
  // `security`'s TLS and token.
  GrpcParameterClient(const ClientSetup& setup,
                      std::vector<std::string> addresses,
                      GrpcClientOptions options, const JobSecurity& security);

  absl::StatusOr<uint64_t> Register() override;
  absl::Status DeclareModel(const std::string& declaration) override;
  absl::StatusOr<uint64_t> Pull(uint64_t clock,
                                absl::Span<float> params) override;
  // Moves to a new buffer while gRPC still holds the last one.
  absl::Span<float> GradientBuffer() override;
  // A push-only step: a unary Push per shard, or a PushStream for a push
  // in several messages; else the shards' StepStreams, driven by a
  // StepDriver.
  absl::StatusOr<StepReport> Step(StepRequest request) override;
  // worker.overlap: an OverlapExchange (worker/rpc/overlap_exchange.h)
  // when `grads` is the buffer GradientBuffer gave; else the default.
  std::unique_ptr<StepExchange> StartPushPull(
      uint64_t clock, absl::Span<const float> grads, float loss,
      absl::Span<float> params) override;
  absl::Status PullRows(uint64_t clock, uint32_t table,
                        absl::Span<const uint64_t> ids,
                        absl::Span<float> out) override;
  absl::Status Initialize(absl::Span<const float> params) override;
  void Heartbeat(uint64_t clock, bool finished,
                 absl::Duration timeout) override;
  absl::Status ReportEpoch(const EpochReport& report) override;

 private:
  // Retry (worker/retry.h) with the client's give_up and clock.
  absl::StatusOr<uint64_t> Retrying(
      const char* what,
      const std::function<absl::StatusOr<uint64_t>()>& attempt);
  // How a blocking call to `shard` ended (`s`): told to ReplicaChoice and,
  // unless OK, named ("<what><shard>: "); a CANCELLED, which this worker
  // never asks for on these calls, was its server's and is UNAVAILABLE
  // (CancelledByServer), so Retrying sends it again.
  absl::Status Ended(int shard, const grpc::Status& s, const char* what);
  absl::StatusOr<uint64_t> PullOnce(uint64_t clock, absl::Span<float> params);
  absl::StatusOr<uint64_t> PushOnce(uint64_t clock,
                                    absl::Span<const float> grads, float loss);
  // One phase of Register on every shard; returns the largest clock.
  absl::StatusOr<uint64_t> RegisterPhase(bool join, uint64_t clock);
  // Each shard's push messages for `grads` computed at `clock` (one: a
  // unary Push; several: a PushStream), referencing the gradient buffer
  // (copying `grads` into it first unless they are already there).
  std::vector<std::vector<grpc::ByteBuffer>> PushMessages(
      uint64_t clock, absl::Span<const float> grads, float loss,
      absl::Span<SharedSegment* const> segments = {});

  const JobConfig& config_;
  const PartitionPlan* plan_;
  const FlatLayout* layout_;
  const int rank_;
  const bool pull_half_;  // compression.pull: fp16
  const GrpcClientOptions options_;
  const uint64_t incarnation_;  // Random, for this process.
  ShardLinks links_;
  // Each step with a pull: a StepCalls (the shards' StepStreams) driven
  // by it.
  StepDriver steps_;
  RowCalls rows_;
  PushFrames push_frames_;
  // Gradients are sent from here; gRPC (or an exchange) holds a reference
  // until sent. `spare_`: the buffer before, reused once released.
  std::shared_ptr<std::vector<float>> gradients_, spare_;
  // The plan as overlapped exchanges look chunks up; made by the first.
  std::unique_ptr<OverlapIndex> overlap_index_;
  const std::function<void(const TracingConfig&)> on_trace_;
};

// Makes GrpcParameterClients for the shards at `servers` (one "host:port"
// per shard; empty: the job's cluster.servers).
ParameterClientFactory GrpcParameterClientFactory(
    std::vector<std::string> servers, GrpcClientOptions options = {});

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_GRPC_PARAMETER_CLIENT_H_
