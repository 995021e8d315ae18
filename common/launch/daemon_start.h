// The start-up paramd-server and paramd-worker share: process settings,
// flags (with the required ones), logging, and the job file.
#ifndef PARAMD_COMMON_LAUNCH_DAEMON_START_H_
#define PARAMD_COMMON_LAUNCH_DAEMON_START_H_

#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/base/flags.h"
#include "common/config/job_config.h"
#include "common/metrics/metrics_endpoint.h"

namespace paramd {

struct DaemonSpec {
  const char* program;  // e.g. "paramd-server"
  const char* usage;    // printed after a usage error
  const char* id_flag;  // the required integer flag: "shard" or "rank"
  // Valued flags besides job, log_level and `id_flag`.
  std::set<std::string> flags;
  // Flags without a value.
  std::set<std::string> switches = {};
};

struct DaemonStart {
  ParsedFlags flags;
  JobConfig config;
  int id = -1;  // The value of --<id_flag>.
};

// Calls SetUpProcess, parses the flags (--job and --<id_flag> required),
// sets up logging (--log_level) and loads the job file; for a job whose
// servers come from Slurm, resolves their addresses (common/launch/slurm.h)
// unless
// --servers or --listen gives them. Every daemon also takes
// --metrics_listen HOST:PORT and --metrics_port_file PATH (see
// StartMetricsEndpoint), and --etcd ENDPOINT,... : coordination.etcd (with
// leases of liveness.lease_seconds when the file has no coordination
// section; paramctl run passes its local etcd so). On failure prints
// the reason to stderr, sets `*exit_code` (2: usage, 1: the job file) and
// returns nothing.
std::optional<DaemonStart> StartDaemon(const DaemonSpec& spec, int argc,
                                       char** argv, int* exit_code);

// Writes `port` and a newline to `path` atomically (a temporary file, then
// rename), for whoever started the process with port 0. `flag` names the
// flag in errors.
absl::Status WritePortFile(const std::string& flag, const std::string& path,
                           int port);

// Serves GET /metrics (from `collect`) and GET /healthz ("ok") when the
// daemon has an address for them: --metrics_listen HOST:PORT (port 0: any
// free port), else metrics.bind:(metrics.port + offset) when metrics.port
// is set; null when neither. Writes the bound port to --metrics_port_file.
absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpoint(
    const DaemonStart& start, int offset, MetricsCollector collect);

}  // namespace paramd

#endif  // PARAMD_COMMON_LAUNCH_DAEMON_START_H_
