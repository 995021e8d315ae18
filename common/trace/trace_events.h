// TraceEvents: one process's step timeline (the job's `tracing` section),
// in the Chrome trace-event format that Perfetto and chrome://tracing
// open. Each process records complete events ("ph":"X") of the clocks in
// [from_step, from_step + steps) and writes them, one JSON object per
// line, to tracing.dir/<file>.jsonl; Merge joins every such file of a
// job into one {"traceEvents": [...]} document.
//
// Times are whole microseconds of the system's real-time clock (Unix
// epoch; absl::Now, the clock every paramd process reads), so
// the processes of one host share one clock exactly, and processes of
// several hosts are as aligned as the hosts' clocks are (NTP or PTP; a
// few hundred microseconds apart under chrony is common). Each process is
// a trace "process" (pid: a server's shard, 1000 + a worker's rank), each
// lane a "thread". Thread-safe.
#ifndef PARAMD_COMMON_TRACE_TRACE_EVENTS_H_
#define PARAMD_COMMON_TRACE_TRACE_EVENTS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"

namespace paramd {

class TraceEvents {
 public:
  // The trace process of shard `shard` / worker `rank`.
  static constexpr int kWorkerPidBase = 1000;

  // `file` names the output (e.g. "worker-1"), `process` the process in
  // the trace ("worker 1"). Off (records nothing) until a window is armed:
  // `config`'s, when it has a tracing.dir, or a later Arm.
  TraceEvents(const TracingConfig& config, std::string file,
              std::string process, int pid);

  // Records the clocks [window.from_step, + window.steps) into window.dir
  // from now on (a running job's `paramctl trace`): true when that is a
  // new window. A window into another folder drops what earlier ones
  // recorded; lane names are kept.
  bool Arm(const TracingConfig& window) ABSL_LOCKS_EXCLUDED(mu_);

  bool on() const { return to_.load(std::memory_order_relaxed) > 0; }
  // Whether events of `clock` are recorded (lock-free: a step asks).
  bool Wants(uint64_t clock) const {
    return clock >= from_.load(std::memory_order_relaxed) &&
           clock < to_.load(std::memory_order_relaxed);
  }
  // The window is past (nothing more will be recorded for `clock` or
  // later) and was not written since: true once per window.
  bool TakeDone(uint64_t clock) ABSL_LOCKS_EXCLUDED(mu_);

  // Names lane `tid` in the trace.
  void NameThread(int tid, absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);
  // A complete event on lane `tid` from `begin` to `end`; `args` are the
  // members of its "args" object as JSON text (`"clock":3,"bytes":8`).
  void Add(absl::string_view name, int tid, absl::Time begin, absl::Time end,
           absl::string_view args = "") ABSL_LOCKS_EXCLUDED(mu_);

  // Writes every event so far to <dir>/<file>.jsonl (replacing an earlier
  // write) and returns that path; nothing (an empty path) while off.
  absl::StatusOr<std::string> Write() const ABSL_LOCKS_EXCLUDED(mu_);
  // The events recorded so far.
  size_t events() const ABSL_LOCKS_EXCLUDED(mu_);

  // The events of every .jsonl file in `dir`, as one trace-event JSON
  // document.
  static absl::StatusOr<std::string> Merge(const std::string& dir);
  // Merge, written to `output`.
  static absl::Status MergeTo(const std::string& dir,
                              const std::string& output);

 private:
  const std::string file_;
  const int pid_;
  std::atomic<uint64_t> from_{0};
  std::atomic<uint64_t> to_{0};  // 0: off.

  mutable absl::Mutex mu_;
  std::string dir_ ABSL_GUARDED_BY(mu_);
  bool written_ ABSL_GUARDED_BY(mu_) = false;  // TakeDone said so.
  // The process's and lanes' names, then the events.
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_COMMON_TRACE_TRACE_EVENTS_H_
