// ParameterClient: a worker's view of all shards. It splits the flat
// gradient buffer into each shard's chunks and joins pulled chunks back
// into the flat parameter buffer, talking to every shard concurrently.
//
// Tensor bytes stay out of protobuf messages (common/wire_format.h): a push
// sends each chunk straight from the gradient buffer, and a pull copies
// each received chunk once, straight to its place in `params`. A shard
// whose chunks fill several messages (kStreamMessageBytes) is pushed and
// pulled through PushStream and PullStream (proto/paramd.proto), so each
// end works on one message while the next is on the wire; a smaller one
// through unary Push and Pull, which cost less per call.
//
// Thread-compatible: one training loop uses it at a time.
#ifndef PARAMD_WORKER_PARAMETER_CLIENT_H_
#define PARAMD_WORKER_PARAMETER_CLIENT_H_

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
#include "common/job_config.h"
#include "common/partitioner.h"
#include "proto/paramd.grpc.pb.h"
#include "worker/model.h"

namespace paramd {

struct ClientOptions {
  // How long Register waits for every server to come up.
  absl::Duration connect_timeout = absl::Seconds(60);
  // Longest wait for one pull: under sync it spans the slowest worker's
  // step.
  absl::Duration pull_timeout = absl::Minutes(10);
  absl::Duration push_timeout = absl::Minutes(1);
};

class ParameterClient {
 public:
  // `addresses`: one "host:port" per shard, in shard order.
  ParameterClient(const JobConfig& config, const PartitionPlan* plan,
                  const FlatLayout* layout, int rank,
                  std::vector<std::string> addresses, ClientOptions options);

  // Registers with every shard, two-phase (see RegisterRequest), so that
  // all shards agree; returns the clock to continue from.
  absl::StatusOr<uint64_t> Register();

  // Fills `params` (flat) with every shard's chunks for a worker at
  // `clock`; returns the version served (the smallest across shards).
  absl::StatusOr<uint64_t> Pull(uint64_t clock, absl::Span<float> params);

  // Sends a heartbeat to every shard (best effort, bounded by `timeout`);
  // `finished` tells the shards this rank is done.
  void Heartbeat(uint64_t clock, bool finished, absl::Duration timeout);

  // A flat buffer to compute the next gradient into: pushing from it sends
  // the bytes in place, without a copy. Call it again for every step (it
  // moves to a new buffer while gRPC still holds the last one).
  absl::Span<float> GradientBuffer();

  // Sends `grads` (flat) computed at `clock` to every shard and waits until
  // each accepted it; returns the smallest version the shards report.
  absl::StatusOr<uint64_t> Push(uint64_t clock, absl::Span<const float> grads);

  // Sets the loss the next pushes report.
  void set_loss(float loss);

  // Sends `grads` (flat) computed at `clock` to every shard and, at once,
  // pulls the parameters for clock + 1 into `params` (as Pull): each pull
  // waits on its server for the version the push helps complete, so a step
  // costs one round trip instead of two. If a push fails, the pulls are
  // cancelled and the push's error is returned.
  absl::StatusOr<uint64_t> PushPull(uint64_t clock,
                                    absl::Span<const float> grads,
                                    absl::Span<float> params);

  // Reports one finished epoch to shard 0, which keeps the job's metrics.
  absl::Status ReportEpoch(const proto::ReportEpochRequest& report);

 private:
  // One phase of Register on every shard; returns the largest clock.
  absl::StatusOr<uint64_t> RegisterPhase(bool join, uint64_t clock);
  // Collects one shard's pulled chunks into the flat parameters, message
  // by message, as they arrive.
  class PullSink {
   public:
    PullSink(const ParameterClient* client, int shard,
             absl::Span<float> params);
    absl::Status Consume(const grpc::ByteBuffer& message);
    // The version served, once every chunk the shard owns arrived.
    absl::StatusOr<uint64_t> Finish() const;

   private:
    const ParameterClient* client_;
    int shard_;
    absl::Span<float> params_;
    std::vector<char> seen_;  // By global chunk index.
    size_t chunks_ = 0;
    size_t messages_ = 0;
    uint64_t version_ = 0;
  };

  // Each shard's push messages for `grads` computed at `clock` (one: a
  // unary Push; several: a PushStream), referencing the gradient buffer
  // (copying `grads` into it first unless they are already there).
  std::vector<std::vector<grpc::ByteBuffer>> PushMessages(
      uint64_t clock, absl::Span<const float> grads);
  grpc::ByteBuffer PullFrame(uint64_t clock) const;
  // Starts one shard's pull or push: a stream when the shard's chunks fill
  // several messages, else a unary call. `done` runs on a gRPC thread when
  // it ends.
  void StartPull(int shard, uint64_t clock, grpc::ClientContext* context,
                 PullSink* sink, std::function<void(absl::Status)> done);
  void StartPush(int shard, std::vector<grpc::ByteBuffer> messages,
                 grpc::ClientContext* context, grpc::ByteBuffer* response,
                 std::function<void(absl::Status)> done);
  // The version served: the smallest across shards.
  static absl::StatusOr<uint64_t> PulledVersion(
      const std::vector<PullSink>& sinks);

  struct ShardConn {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<proto::ParameterService::Stub> stub;
    std::unique_ptr<grpc::GenericStub> generic;
    // The framing before each owned chunk in a push (never changes).
    std::vector<std::string> chunk_headers;
    // Owned chunks [begin, end) sent together in one stream message.
    std::vector<std::pair<size_t, size_t>> groups;
  };

  const JobConfig& config_;
  const PartitionPlan* plan_;
  const FlatLayout* layout_;
  const int rank_;
  const ClientOptions options_;
  const uint64_t incarnation_;  // Random, for this process.
  // Full method names, as gRPC calls them.
  const std::string push_method_, pull_method_, push_stream_method_,
      pull_stream_method_;
  std::vector<ShardConn> shards_;
  float loss_ = 0;
  // Gradients are sent from here; gRPC holds a reference until sent.
  std::shared_ptr<std::vector<float>> gradients_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_PARAMETER_CLIENT_H_
