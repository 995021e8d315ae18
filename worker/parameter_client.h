// ParameterClient: a worker's view of every shard of the job, as the
// training loop sees it. It splits the flat gradient buffer (FlatLayout,
// common/model/model_spec.h) into each shard's chunks, joins pulled chunks back
// into the flat parameters, and speaks for one rank.
//
// Plain C++: no gRPC or protobuf types. The gRPC implementation is made by
// GrpcParameterClientFactory (worker/rpc/grpc_parameter_client.h); tests
// use one that calls each shard's logic in the same process.
//
// Thread-compatible: one training loop uses it at a time, except Heartbeat,
// which may be called from another thread at any time.
#ifndef PARAMD_WORKER_PARAMETER_CLIENT_H_
#define PARAMD_WORKER_PARAMETER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/base/epoch_report.h"
#include "common/config/job_config.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"

namespace paramd {

// One step's push and the pull of the next clock, in flight while the
// worker computes (worker.overlap): the push leaves piece by piece as the
// backward pass finishes the gradient, and the next step's forward pass
// reads the parameters piece by piece as they arrive.
class StepExchange {
 public:
  virtual ~StepExchange() = default;
  // grads [begin, end) are final; every element is reported once before
  // Finish.
  virtual void GradientReady(int64_t begin, int64_t end) = 0;
  // Blocks until params [begin, end) of the next clock have arrived. If
  // the exchange failed, finishes it (as Finish) and returns that result.
  virtual absl::Status AwaitParams(int64_t begin, int64_t end) = 0;
  // Waits for the whole exchange; returns what PushPull would. An exchange
  // that failed is done again by PushPull, which retries as it does (a push
  // a shard applied already is acknowledged as a duplicate, not applied
  // twice). Later calls return the same result.
  virtual absl::StatusOr<uint64_t> Finish() = 0;
};

// When one shard's part of a PushPull went (the step timeline). `pushed`:
// the step's one message was handed to the transport (a StepStream's
// write done), or its push call was acknowledged; InfinitePast when the
// client cannot tell (a unary PushPull). `replied`: the pull's first reply
// message arrived; `end`: its last was read into the parameters.
struct ShardCallTimes {
  absl::Time begin, pushed, replied, end;
};

class ParameterClient {
 public:
  virtual ~ParameterClient() = default;

  // Registers with every shard, two-phase (see RegisterRequest in
  // proto/paramd.proto), so that all shards agree; returns the clock to
  // continue from.
  virtual absl::StatusOr<uint64_t> Register() = 0;

  // Fills `params` (flat) with every shard's chunks for a worker at
  // `clock`; returns the version served (the smallest across shards).
  virtual absl::StatusOr<uint64_t> Pull(uint64_t clock,
                                        absl::Span<float> params) = 0;

  // A flat buffer to compute the next gradient into: pushing from it may
  // send the bytes in place, without a copy. Call it again for every step.
  virtual absl::Span<float> GradientBuffer() = 0;

  // Sends `grads` (flat) computed at `clock`, with the batch's `loss`, to
  // every shard and waits until each accepted it; returns the smallest
  // version the shards report. Aborted: a shard dropped this rank (its
  // lease expired); register again.
  virtual absl::StatusOr<uint64_t> Push(uint64_t clock,
                                        absl::Span<const float> grads,
                                        float loss) = 0;

  // Push, and at once Pull for clock + 1 into `params`: each pull waits on
  // its shard for the version the push helps complete, so a step costs one
  // round trip. If a push fails, the pulls are abandoned and the push's
  // error is returned.
  virtual absl::StatusOr<uint64_t> PushPull(uint64_t clock,
                                            absl::Span<const float> grads,
                                            float loss,
                                            absl::Span<float> params) = 0;

  // From now on each PushPull writes its calls' times (one per shard, of
  // its last attempt) to `*out`; nullptr stops it. This default records
  // nothing.
  virtual void RecordCallTimes(std::vector<ShardCallTimes>* out) {}

  // The next PushPull runs `work` once on the calling thread after its
  // push is sent, while it waits for the replies (work the caller has to do
  // before its next step anyway: the next batch). A PushPull that fails
  // before it sends may not run it, and this default drops it: the caller
  // must not count on it having run.
  virtual void WhileWaiting(std::function<void()> work) {}

  // PushPull as a StepExchange: `grads` (the buffer GradientBuffer gave)
  // is filled while the exchange runs, and `params` receives clock + 1;
  // neither is touched by the caller (beyond the reported pieces of
  // grads) until Finish. This default sends everything at Finish (or at
  // the first AwaitParams): no overlap.
  virtual std::unique_ptr<StepExchange> StartPushPull(
      uint64_t clock, absl::Span<const float> grads, float loss,
      absl::Span<float> params);

  // Fills `out` (dim floats per id) with the rows `ids` of embedding table
  // `table` (model.embeddings; ids sorted, distinct, below its rows) for a
  // worker at `clock` (waiting as Pull does): each row from the shard that
  // owns it (common/model/rows.h), every shard at once.
  virtual absl::Status PullRows(uint64_t clock, uint32_t table,
                                absl::Span<const uint64_t> ids,
                                absl::Span<float> out) = 0;

  // Row gradients of `table` (dim floats per id, ids sorted and distinct)
  // that every Push and PushPull carries from now on, each row to its
  // shard, until replaced: set them before each step's push.
  virtual void SetRowGradients(uint32_t table, absl::Span<const uint64_t> ids,
                               absl::Span<const float> grads) = 0;

  // Sends `params` (flat) as rank 0's initial values to every shard
  // (model.initial_values: rank0; proto Initialize), retrying what no
  // server answered; a shard that has its values already acknowledges and
  // keeps them. Register first. This default: Unimplemented.
  virtual absl::Status Initialize(absl::Span<const float> params);

  // Sends a heartbeat to every shard (best effort, bounded by `timeout`);
  // `finished` tells the shards this rank is done.
  virtual void Heartbeat(uint64_t clock, bool finished,
                         absl::Duration timeout) = 0;

  // Reports one finished epoch to shard 0, which keeps the job's metrics.
  virtual absl::Status ReportEpoch(const EpochReport& report) = 0;
};

// What a client is made for; each pointer outlives the client.
struct ClientSetup {
  const JobConfig* config = nullptr;
  const PartitionPlan* plan = nullptr;
  const FlatLayout* layout = nullptr;
  int rank = 0;
  // Called (from the heartbeat's thread) with a step timeline's window a
  // shard's heartbeat reply carries (paramctl trace on a running job);
  // may be empty.
  std::function<void(const TracingConfig&)> on_trace;
};

using ParameterClientFactory =
    std::function<absl::StatusOr<std::unique_ptr<ParameterClient>>(
        const ClientSetup&)>;

// The two-phase registration every client runs (RegisterRequest in
// proto/paramd.proto): `phase(false, 0)` asks every shard for the clock it
// proposes, `phase(true, c)` joins every shard at c; each returns the
// largest clock the shards answered. A shard may move on between the
// phases (the join is then Aborted): it starts over, up to 20 times — from
// the fourth, joining 2 clocks ahead of the proposal, which a shard
// accepts (proto/paramd.proto) — and returns the clock joined at or the
// last error.
absl::StatusOr<uint64_t> RegisterInTwoPhases(
    const std::function<absl::StatusOr<uint64_t>(bool join, uint64_t clock)>&
        phase);

}  // namespace paramd

#endif  // PARAMD_WORKER_PARAMETER_CLIENT_H_
