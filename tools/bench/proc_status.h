// What Linux says of a process in /proc/PID/status, for the benches and
// the load test: its resident set now and at its peak, its threads and
// their context switches.
#ifndef PARAMD_TOOLS_BENCH_PROC_STATUS_H_
#define PARAMD_TOOLS_BENCH_PROC_STATUS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace paramd {

// The number after "`key`:" in /proc/`pid`/status (pid 0: this process),
// e.g. "VmHWM" (in kB) or "Threads"; -1 when the process or the key is
// gone.
int64_t ProcStatusValue(pid_t pid, const std::string& key);

// Resident set (VmRSS) and its peak (VmHWM) in bytes; -1 when unknown.
int64_t RssBytes(pid_t pid);
int64_t PeakRssBytes(pid_t pid);
// Threads of the process; -1 when unknown.
int64_t ThreadCount(pid_t pid);
// Context switches (voluntary and not) of the process's live threads so
// far; -1 when the process is gone.
int64_t ContextSwitches(pid_t pid);

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_PROC_STATUS_H_
