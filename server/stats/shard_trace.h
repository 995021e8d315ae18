// ShardTrace: a shard's part of the step timeline (the job's `tracing`
// section): two lanes per rank, one with each traced push's apply (checks
// to the policy's answer), one with each traced pull's wait for its
// version (the two overlap when the pull came before its push was applied:
// a PullStream beside a PushStream, an overlapped step) and, on a
// StepStream, the reply's framing and write; args clock (the
// worker step they serve: a pull at clock c ends step c - 1), rank,
// version, bytes and, for a push, its staleness. Inside the apply of the
// push that made an optimizer step (under sync: the round's last), the
// step chunk by chunk. Off, it records nothing. A
// running job's window comes from paramctl trace (Serve), and the shard hands
// it on to the workers in their heartbeat replies. Thread-safe.
#ifndef PARAMD_SERVER_STATS_SHARD_TRACE_H_
#define PARAMD_SERVER_STATS_SHARD_TRACE_H_

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/trace/trace_events.h"
#include "proto/paramd.pb.h"
#include "server/store/shard_store.h"

namespace paramd {

class ShardTrace {
 public:
  ShardTrace(const JobConfig& config, int shard);

  // Whether the push of `clock` is recorded.
  bool WantsPush(uint64_t clock) const { return events_.Wants(clock); }
  // `staleness`: the push's tau (its rank's last accepted push's, for a
  // duplicate).
  void Push(int rank, uint64_t clock, absl::Time begin, absl::Time end,
            uint64_t version, uint64_t bytes, bool duplicate,
            uint64_t staleness);
  void Pull(int rank, uint64_t clock, absl::Time begin, absl::Time ready,
            uint64_t version);
  // The optimizer step a traced push of `rank` at `clock` made (under sync:
  // its round's), inside that push's apply: `step`, the `copy` of the
  // parameters a pull still held, and a `chunk` per chunk of `store`.
  void Step(int rank, uint64_t clock, const StepTimes& times,
            const ShardStore& store);
  // Whether the pull of `clock` (the pull half of step clock - 1) is
  // recorded.
  bool WantsPull(uint64_t clock) const {
    return clock > 0 && events_.Wants(clock - 1);
  }
  // A StepStream's reply to that pull, from the snapshot's framing to gRPC
  // reporting it written, on the pulls' lane after the wait.
  void Reply(int rank, uint64_t clock, absl::Time begin, absl::Time end,
             uint64_t bytes);
  // Writes what was recorded (<dir>/server-K.jsonl).
  absl::Status Write() const { return events_.Write().status(); }

  // A TraceRequest (proto/paramd.proto), checked field by field.
  absl::StatusOr<proto::TraceResponse> Serve(const proto::TraceRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The window paramctl armed, in the heartbeat reply of a rank at `clock`
  // that has not passed it.
  void FillHeartbeat(uint64_t clock, proto::HeartbeatResponse* response) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int shard_;
  const int workers_;  // Rank r's pulls are on lane workers_ + r.
  TraceEvents events_;
  mutable absl::Mutex mu_;
  std::optional<TracingConfig> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STATS_SHARD_TRACE_H_
