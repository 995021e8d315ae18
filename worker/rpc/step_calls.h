// StepCalls: one PushPull step of a worker to every shard at once, each
// a step of the shard's StepStream, however many messages push and pull
// take (ShardLinks). A failed step cancels the other shards' (their pulls
// would wait in vain), and the step as a whole is bounded by the longer of
// the push and pull timeouts (a stream's step has no deadline of its
// own). With backups, a step waiting on a
// shard whose server answered nothing for options.hung_after
// (ReplicaChoice::Hung) ends UNAVAILABLE naming it, for FailOver.
//
// Thread-compatible: one training loop uses it at a time; its thread runs
// the streams' events while it waits.
#ifndef PARAMD_WORKER_RPC_STEP_CALLS_H_
#define PARAMD_WORKER_RPC_STEP_CALLS_H_

#include <grpcpp/support/byte_buffer.h>

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/parameter_client.h"
#include "worker/rpc/shard_links.h"

namespace paramd {

class StepCalls {
 public:
  // `setup`'s plan and layout and `links` outlive this.
  StepCalls(const ClientSetup& setup, ShardLinks* links);

  // Each shard's push messages of a step (PushFrames::Build), made once its
  // StepStream is open, with the shards' shared-memory segments (null:
  // by the socket).
  using Messages = std::function<std::vector<std::vector<grpc::ByteBuffer>>(
      absl::Span<SharedSegment* const> segments)>;

  // Sends each shard's push of `clock` (from `messages`) and pulls clock +
  // 1 into `params`; returns the version pulled (the smallest across
  // shards) or the failure that matters most, naming the RPC and the
  // shard. A shard whose server refused its segment is told to ShardLinks
  // (RefuseSegment). Once the calls are started, `*while_waiting` (when
  // set) runs on this thread and is reset, before the wait for replies.
  absl::StatusOr<uint64_t> Run(uint64_t clock, const Messages& messages,
                               absl::Span<float> params,
                               std::function<void()>* while_waiting = nullptr);

  // From now on each Run writes its calls' times, one per shard, to
  // `*out` (the step timeline); nullptr stops it.
  void RecordTimes(std::vector<ShardCallTimes>* out) { times_ = out; }

 private:
  // One step's calls to every shard and what they answer.
  struct Round;
  // Starts every shard's step of `round`, its push in `messages`.
  void Start(std::vector<std::vector<grpc::ByteBuffer>> messages, Round* round);
  void CancelSteps(Round* round);
  // Waits until every step of `round` ended or `until` passes; whether
  // they all did. Steps end as this thread polls the streams' queue
  // (ShardLinks::PollSteps), which it does while it waits.
  bool Await(Round* round, absl::Time until);
  // The longer of the push and pull timeouts: what a step may take.
  absl::Duration StepLimit() const;
  // Waits until every call of `round` ended: -1, or the shard taken for
  // hung (its server answered nothing for options.hung_after; the step's
  // other calls cancelled), or kPastDeadline once StepLimit passed (every
  // call cancelled and ended).
  static constexpr int kPastDeadline = -2;
  int AwaitAll(Round* round);
  // The step's outcome from its calls' (`hung`: AwaitAll's shard): the
  // failure that matters most, each shard's news told to ShardLinks.
  absl::Status Conclude(Round* round, int hung);

  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const bool pull_half_;  // compression.pull: fp16
  ShardLinks* const links_;
  std::vector<ShardCallTimes>* times_ = nullptr;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_STEP_CALLS_H_
