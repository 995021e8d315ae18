// ShardTrace: a shard's part of the step timeline (the job's `tracing`
// section): a lane per rank, with each traced push's apply (checks to the
// policy's answer) and each traced pull's wait for its version, args
// clock (the worker step they serve: a pull at clock c ends step c - 1),
// version and bytes. Off, it records nothing. Thread-safe.
#ifndef PARAMD_SERVER_SHARD_SHARD_TRACE_H_
#define PARAMD_SERVER_SHARD_SHARD_TRACE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/trace/trace_events.h"

namespace paramd {

class ShardTrace {
 public:
  ShardTrace(const JobConfig& config, int shard);

  void Push(int rank, uint64_t clock, absl::Time begin, absl::Time end,
            uint64_t version, uint64_t bytes, bool duplicate);
  void Pull(int rank, uint64_t clock, absl::Time begin, absl::Time ready,
            uint64_t version);
  // Writes what was recorded (tracing.dir/server-K.jsonl).
  absl::Status Write() const { return events_.Write(); }

 private:
  TraceEvents events_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_TRACE_H_
