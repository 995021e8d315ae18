// StepCalls: one step of a worker — its push to every shard and the pull
// that answers it — over gRPC: the StepTransport (worker/step/step_driver.h)
// whose shard's part is a step of the shard's StepStream, however many
// messages push and pull take (ShardLinks), the pull going straight into
// the parameters (PullSink). A server that cannot map this worker's shared
// memory is told to ShardLinks (RefuseSegment) and the step sent again by
// the socket.
//
// One per step; thread-compatible: the StepDriver's thread uses it, and
// the streams' events run on it while it polls.
#ifndef PARAMD_WORKER_RPC_STEP_CALLS_H_
#define PARAMD_WORKER_RPC_STEP_CALLS_H_

#include <grpcpp/support/byte_buffer.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/parameter_client.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/shard_links.h"
#include "worker/step/step_driver.h"

namespace paramd {

class StepCalls final : public StepTransport {
 public:
  // Each shard's push messages of a step (PushFrames::Build), made once its
  // StepStream is open, with the shards' shared-memory segments (null:
  // by the socket).
  using Messages = std::function<std::vector<std::vector<grpc::ByteBuffer>>(
      absl::Span<SharedSegment* const> segments)>;

  // The step's push comes from `messages`, its pull goes into `params`.
  // `setup`'s plan and layout, `links`, `messages` and `params` outlive
  // this.
  StepCalls(const ClientSetup& setup, ShardLinks* links,
            const Messages& messages, absl::Span<float> params);

  int shards() const override { return links_->size(); }
  void Begin(bool timed) override;
  void Start(int shard, ShardCallTimes* times,
             std::function<void(absl::Status)> done) override;
  void Cancel(int shard) override { links_->CancelStep(shard); }
  bool Poll(absl::Time until) override { return links_->PollSteps(until); }
  absl::StatusOr<uint64_t> Pulled() const override {
    return PulledVersion(sinks_);
  }
  bool TakeRefusal() override { return links_->TakeSegmentRefusals(); }
  bool FailOver() override { return links_->FailOver(); }
  std::string Where(int shard) const override { return links_->address(shard); }

 private:
  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const bool pull_half_;  // compression.pull: fp16
  ShardLinks* const links_;
  const Messages& make_messages_;
  const absl::Span<float> params_;
  // The attempt's: each shard's push messages, until started, and pull.
  std::vector<std::vector<grpc::ByteBuffer>> messages_;
  std::vector<PullSink> sinks_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_STEP_CALLS_H_
