// StepDriver: a worker's step — its push to every shard and the pull that
// answers it — as logic free of any transport. It starts every shard's
// part through a StepTransport, cancels the others when one fails (their
// pulls would wait in vain), bounds the attempt by its limit, ends it when
// a shard with a backup answers nothing for hung_after (ReplicaChoice),
// says which failure matters, and retries what no server answered, moving
// shards to their other replica (worker/retry.h). Time comes from a Clock,
// so tests drive deadlines and hang detection with a FakeClock and a
// transport in process; over gRPC the transport is StepCalls
// (worker/rpc/step_calls.h).
//
// Thread-compatible: one training loop steps at a time; the transport's
// events run on its thread while it waits.
#ifndef PARAMD_WORKER_STEP_STEP_DRIVER_H_
#define PARAMD_WORKER_STEP_STEP_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "worker/parameter_client.h"
#include "worker/replica_choice.h"
#include "worker/retry.h"

namespace paramd {

// How one step reaches each shard: the thin per-shard interface a
// StepDriver drives. Every `done` runs on the thread that calls Start or
// Poll.
class StepTransport {
 public:
  virtual ~StepTransport() = default;

  virtual int shards() const = 0;
  // Readies an attempt of the step at every shard (its call open, its push
  // made). `timed`: Start's `times` are asked for.
  virtual void Begin(bool timed) = 0;
  // Starts the shard's part of the attempt. `done` runs once with how it
  // ended: from Poll, or here when the shard's call cannot carry it.
  // `times`, unless null, receives when the push was written (`pushed`)
  // and the reply's first message came (`replied`), before `done` runs.
  virtual void Start(int shard, ShardCallTimes* times,
                     std::function<void(absl::Status)> done) = 0;
  // Ends the shard's part in flight, if any: its `done` gets CANCELLED.
  virtual void Cancel(int shard) = 0;
  // Runs the next event (a `done` among them), waiting for one until
  // `until` on the driver's clock; whether one came.
  virtual bool Poll(absl::Time until) = 0;
  // After a successful attempt: the version pulled, the smallest across
  // shards.
  virtual absl::StatusOr<uint64_t> Pulled() const = 0;
  // After a failed attempt: whether a shard refused how it was reached (a
  // shared-memory segment its server cannot map) — it refused the step
  // whole, so the attempt goes again at once, reached otherwise.
  virtual bool TakeRefusal() = 0;
  // After an attempt that found no server: moves every such shard with a
  // backup to its other replica (ReplicaChoice::FailOver); whether any
  // moved.
  virtual bool FailOver() = 0;
  // Where the shard is reached now, for errors: e.g. "127.0.0.1:4731".
  virtual std::string Where(int shard) const = 0;
};

class StepDriver {
 public:
  struct Options {
    // What one attempt may take: the longer of the push and pull timeouts
    // (a step has no deadline of its own on the transport).
    absl::Duration limit = absl::Minutes(10);
    // How attempts go on after the first that found no server: give_up
    // (liveness.give_up_seconds), who steps (for the log: e.g. "rank 3")
    // and the clock that the limit, the hang watch and the back-off read.
    // Its fail_over is the transport's, set by Step.
    RetryOptions retry;
  };

  // `replicas` (which replica each shard is reached at, and when one is
  // hung) outlives this.
  StepDriver(Options options, ReplicaChoice* replicas);

  const Options& options() const { return options_; }

  // One step of `clock` over `transport`: returns the version pulled or
  // the failure that matters most, naming the shard. Once the first
  // attempt's calls are started, `while_waiting` (when set) runs here,
  // before the wait for replies. `times`, unless null, receives the last
  // attempt's times, one per shard (the step timeline).
  absl::StatusOr<uint64_t> Step(StepTransport* transport, uint64_t clock,
                                std::function<void()> while_waiting,
                                std::vector<ShardCallTimes>* times);

 private:
  // One attempt's calls and what they answered.
  struct Round;
  // One attempt, and its sends again after refusals.
  absl::StatusOr<uint64_t> Attempt(StepTransport* transport, uint64_t clock,
                                   std::function<void()>* while_waiting,
                                   std::vector<ShardCallTimes>* times);
  absl::Status AttemptOnce(StepTransport* transport, uint64_t clock,
                           std::function<void()>* while_waiting,
                           std::vector<ShardCallTimes>* times);
  void Start(StepTransport* transport, Round* round);
  // Cancels every call of `round`.
  static void Cancel(StepTransport* transport, Round* round);
  // Polls until every call of `round` ended or `until` passes; whether
  // they all did.
  static bool Await(StepTransport* transport, Round* round, absl::Time until);
  // Waits until every call of `round` ended: -1, or the shard taken for
  // hung (the round's other calls cancelled), or kPastLimit once the limit
  // passed (every call cancelled and ended).
  static constexpr int kPastLimit = -2;
  int AwaitAll(StepTransport* transport, Round* round);
  // The attempt's outcome from its calls' (`hung`: AwaitAll's shard), each
  // shard's news told to the ReplicaChoice.
  absl::Status Conclude(StepTransport* transport, Round* round, int hung);

  const Options options_;
  ReplicaChoice* const replicas_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_STEP_STEP_DRIVER_H_
