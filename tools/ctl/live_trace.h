// A step timeline of a job that is already running (paramctl trace --job
// J --steps N): every shard is told a window of worker clocks a little
// ahead of the fastest worker, records its part of those steps and hands
// the window to the workers in their heartbeat replies; each worker writes
// its file once it has passed the window, then each shard writes its own,
// and the files in the folder are merged into one trace-event JSON file.
//
// The window starts far enough ahead for every worker to hear of it first:
// the fastest worker's clock now, plus the steps the job makes in two
// heartbeat periods and a half (the rate read from two status calls half
// a second apart); --from-step sets it by hand. Each process writes on its
// own host: across hosts, the files are copied into one folder and merged
// with `paramctl trace DIR`.
#ifndef PARAMD_TOOLS_CTL_LIVE_TRACE_H_
#define PARAMD_TOOLS_CTL_LIVE_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/rpc/credentials.h"

namespace paramd {

struct LiveTraceOptions {
  std::vector<std::string> addresses;  // One per shard.
  const JobSecurity* security = nullptr;
  double heartbeat_seconds = 1;  // The job's liveness.heartbeat_seconds.
  std::string dir;               // Created when missing; no .jsonl in it.
  uint64_t steps = 4;
  std::optional<uint64_t> from_step;  // Unset: chosen as above.
  // How long to wait for the workers' files beyond the window's expected
  // end.
  absl::Duration wait = absl::Seconds(30);
};

// Traces the window; returns the merged document's path (dir/trace.json).
// Progress and what is missing (a worker whose file did not come, a
// server that wrote on another host) go to stdout.
absl::StatusOr<std::string> TraceRunningJob(const LiveTraceOptions& options);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_LIVE_TRACE_H_
