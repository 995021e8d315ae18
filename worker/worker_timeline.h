// WorkerTimeline: a worker's part of the step timeline (the job's `tracing`
// section, or a window paramctl trace arms on a running job through the
// heartbeats): lane 0 has the steps, lane 1 + s the step's call to shard s
// as the worker saw it (push, wait, pull: a timed step's StepReport),
// and, under worker.overlap, one more lane the exchanges that run on into
// the next step. paramd-worker's Trainer and the framework worker
// (python/native/framework_worker.h) each keep one.
//
// Thread-safe (the heartbeat thread arms windows while the training loop
// records).
#ifndef PARAMD_WORKER_WORKER_TIMELINE_H_
#define PARAMD_WORKER_WORKER_TIMELINE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/trace/trace_events.h"
#include "worker/parameter_client.h"

namespace paramd {

class WorkerTimeline {
 public:
  WorkerTimeline(const JobConfig& config, int rank, int num_shards);

  // Whether events of `clock` are recorded.
  bool Wants(uint64_t clock) const { return events_.Wants(clock); }
  // An event of step `clock` on lane `lane` (`args`: more "args" members
  // as JSON text, after the clock).
  void Add(absl::string_view name, int lane, absl::Time begin, absl::Time end,
           uint64_t clock, absl::string_view args = "");
  // Step `clock`'s calls to each shard, on the shards' lanes.
  void AddShardCalls(uint64_t clock, const std::vector<ShardCallTimes>& calls);
  int exchange_lane() const { return 1 + num_shards_; }

  // For ClientSetup::on_trace: arms a window a heartbeat reply carried
  // (logged once per window).
  std::function<void(const TracingConfig&)> OnTrace();
  // Writes the file now if the window ended before `next_clock` and was
  // not written since (paramctl trace waits for it).
  void WriteIfDone(uint64_t next_clock);
  // Writes what was recorded (a failure is logged: training goes on).
  void Write() const;

 private:
  const int rank_;
  const int num_shards_;
  TraceEvents events_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_WORKER_TIMELINE_H_
