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
#include <string>
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
  // Waits for the whole exchange; returns the version a Step with params
  // would. An exchange that failed is done again as such a Step, which
  // retries as it does (a push a shard applied already is acknowledged as
  // a duplicate, not applied twice). Later calls return the same result.
  virtual absl::StatusOr<uint64_t> Finish() = 0;
};

// When one shard's part of a step went (the step timeline). `pushed`:
// the step's one message was handed to the transport (a StepStream's
// write done), or its push call was acknowledged; InfinitePast when the
// client cannot tell (a unary PushPull). `replied`: the pull's first reply
// message arrived; `end`: its last was read into the parameters.
struct ShardCallTimes {
  absl::Time begin, pushed, replied, end;
};

// An embedding table's row gradients that ride on a step's push
// (model.embeddings): dim floats per id, ids sorted and distinct, each row
// to the shard that owns it (common/model/rows.h).
struct RowGradients {
  uint32_t table = 0;
  absl::Span<const uint64_t> ids;
  absl::Span<const float> grads;
};

// One step of a worker, as it asks the shards for it: everything the step
// sends and where its answer goes. Nothing of it outlives the step. Its
// first four fields in order make a plain step: {clock, grads, loss,
// params}.
struct StepRequest {
  // The clock the gradient was computed at.
  uint64_t clock = 0;
  // The flat gradient (best: the buffer GradientBuffer gave, which may be
  // sent in place) and the batch's loss.
  absl::Span<const float> grads;
  float loss = 0;
  // Where the pull of clock + 1 lands: each shard's pull waits for the
  // version this push helps complete, so a step costs one round trip.
  absl::Span<float> params;
  // The step only pushes (params unused), and ends once every shard
  // accepted it.
  bool push_only = false;
  // Embedding rows' gradients pushed with this step, at most one entry per
  // table; none without.
  std::vector<RowGradients> rows;
  // Runs once on the calling thread after the push is sent, while the
  // step waits for its replies (work the caller has to do before its next
  // step anyway: the next batch). A step that fails before it sends, a
  // push-only step, or a client that cannot wait apart may not run it:
  // the caller must not count on it having run.
  std::function<void()> while_waiting;
  // Whether the report gives each shard's call times (the step timeline).
  bool timed = false;
};

// What a step came to.
struct StepReport {
  // The smallest version the shards report: the one pulled, or (a
  // push-only step) the one each shard's push went into.
  uint64_t version = 0;
  // With StepRequest::timed, each shard's call times of the step's last
  // attempt, where the client can tell them; empty otherwise.
  std::vector<ShardCallTimes> times;
};

class ParameterClient {
 public:
  virtual ~ParameterClient() = default;

  // Registers with every shard, two-phase (see RegisterRequest in
  // proto/paramd.proto), so that all shards agree; returns the clock to
  // continue from.
  virtual absl::StatusOr<uint64_t> Register() = 0;

  // Declares the worker's model to every shard (proto DeclareModel;
  // `declaration` as WithDeclaredModel takes it), retrying what no server
  // answered; before Register. FailedPrecondition when a shard serves
  // another model (naming what differs). This default: Unimplemented.
  virtual absl::Status DeclareModel(const std::string& declaration);

  // Fills `params` (flat) with every shard's chunks for a worker at
  // `clock`; returns the version served (the smallest across shards).
  virtual absl::StatusOr<uint64_t> Pull(uint64_t clock,
                                        absl::Span<float> params) = 0;

  // A flat buffer to compute the next gradient into: pushing from it may
  // send the bytes in place, without a copy. Call it again for every step.
  virtual absl::Span<float> GradientBuffer() = 0;

  // One step (see StepRequest): sends the gradient to every shard and,
  // with params, pulls clock + 1 into them; retries what no server
  // answered. If a push fails, the pulls are abandoned and the push's error
  // is returned. Aborted: a shard dropped this rank (its lease expired);
  // register again.
  virtual absl::StatusOr<StepReport> Step(StepRequest request) = 0;

  // A step with params, as a StepExchange: `grads` (the buffer
  // GradientBuffer gave) is filled while the exchange runs, and `params`
  // receives clock + 1; neither is touched by the caller (beyond the
  // reported pieces of grads) until Finish. No rows, no call times. This
  // default sends everything at Finish (or at the first AwaitParams): no
  // overlap.
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

// `client`'s Step(`request`): the version of its report. E.g.
// StepVersion(client, {clock, grads, loss, params}), a step and nothing
// more.
absl::StatusOr<uint64_t> StepVersion(ParameterClient& client,
                                     StepRequest request);

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
