// paramd-bench's workers as processes of their own, each on a host of its
// own (--worker_hosts, --worker_launch): what the workers of a cluster
// are, where each worker's host link carries only its own bytes. The
// bench starts itself once per rank (paramd-bench --bench_worker ...)
// through the launcher; each child registers and warms up (bench_worker.h),
// says so by a file, and waits for the start time the bench then writes,
// so that every worker's timed part begins together; it runs for the
// cell's seconds and writes its latencies to a file the bench reads. The
// files are in the bench's folder, which the hosts share (scripts/
// hosts.sh's simulated hosts share this one's files).
#ifndef PARAMD_TOOLS_BENCH_WORKER_PROCESSES_H_
#define PARAMD_TOOLS_BENCH_WORKER_PROCESSES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/flags.h"
#include "common/config/job_config.h"
#include "tools/bench/bench_transport.h"

namespace paramd {

// RunClients (bench_transport.h) with each of `config`'s workers a child
// process on o.worker_hosts, reading the job file `job_path` (config's),
// against the shards at `addresses`; `during` runs about every 100 ms on
// this thread while they run.
absl::StatusOr<TransportResult> RunWorkerProcesses(
    const std::string& job_path, const JobConfig& config,
    const std::vector<std::string>& addresses, Mode mode,
    const TransportOptions& o, const std::function<void()>& during);

// The flags of a child (paramd-bench --bench_worker), beside the bench's.
std::vector<std::string> BenchWorkerFlags();
// A child's whole run: 0 once its result file is written (a failed run
// writes its error there too), 2 when its flags are wrong.
int BenchWorkerMain(const ParsedFlags& flags);

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_WORKER_PROCESSES_H_
