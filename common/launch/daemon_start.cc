#include "common/launch/daemon_start.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/logging.h"
#include "common/base/process_setup.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/coord/rpc/member_registration.h"
#include "common/launch/slurm.h"

namespace paramd {
namespace {

// How long a worker waits for servers to register in etcd
// (cluster.servers: {etcd: N}): they may start after it.
constexpr absl::Duration kFindServersFor = absl::Minutes(2);

std::nullopt_t Fail(const char* program, const absl::Status& status,
                    const char* usage, int code, int* exit_code) {
  std::fprintf(stderr, "%s: %s\n", program,
               std::string(status.message()).c_str());
  if (usage != nullptr) std::fprintf(stderr, "%s\n", usage);
  *exit_code = code;
  return std::nullopt;
}

}  // namespace

absl::Status WritePortFile(const std::string& flag, const std::string& path,
                           int port) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.good()) {
      return absl::UnavailableError(
          absl::StrCat("--", flag, ": cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("--", flag, ": cannot rename to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> StartMetricsEndpoint(
    const DaemonStart& start, int offset, MetricsCollector collect) {
  std::string address;
  if (start.flags.Has("metrics_listen")) {
    address = start.flags.Get("metrics_listen", "");
  } else if (start.config.metrics.port > 0) {
    const int port = start.config.metrics.port + offset;
    if (port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics.port ", start.config.metrics.port, " + ",
                       offset, " is past 65535"));
    }
    address = absl::StrCat(start.config.metrics.bind, ":", port);
  } else {
    return nullptr;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<MetricsEndpoint> server,
                   MetricsEndpoint::Start(address, std::move(collect)));
  if (start.flags.Has("metrics_port_file")) {
    RETURN_IF_ERROR(WritePortFile("metrics_port_file",
                                  start.flags.Get("metrics_port_file", ""),
                                  server->port()));
  }
  return server;
}

std::optional<DaemonStart> StartDaemon(const DaemonSpec& spec, int argc,
                                       char** argv, int* exit_code) {
  SetUpProcess();
  std::set<std::string> valued = spec.flags;
  valued.insert({"job", spec.id_flag, "log_level", "metrics_listen",
                 "metrics_port_file", "etcd"});
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, valued, spec.switches);
  if (!flags.ok())
    return Fail(spec.program, flags.status(), spec.usage, 2, exit_code);
  if (!flags->Has("job") || !flags->Has(spec.id_flag)) {
    return Fail(spec.program,
                absl::InvalidArgumentError(absl::StrCat(
                    "--job and --", spec.id_flag, " are required")),
                spec.usage, 2, exit_code);
  }
  DaemonStart start;
  absl::StatusOr<int> id = flags->GetInt(spec.id_flag, -1);
  if (!id.ok()) return Fail(spec.program, id.status(), nullptr, 2, exit_code);
  if (absl::Status s =
          InitLogging(spec.program, flags->Get("log_level", "info"));
      !s.ok()) {
    return Fail(spec.program, s, nullptr, 2, exit_code);
  }
  absl::StatusOr<JobConfig> config = LoadJobConfig(flags->Get("job", ""));
  if (!config.ok()) {
    return Fail(spec.program, config.status(), nullptr, 1, exit_code);
  }
  if (flags->Has("etcd")) {
    const bool had = config->coordination.enabled();
    config->coordination.etcd =
        absl::StrSplit(flags->Get("etcd", ""), ',', absl::SkipEmpty());
    if (config->coordination.etcd.empty()) {
      return Fail(spec.program,
                  absl::InvalidArgumentError(
                      "--etcd: no endpoint (HOST:PORT or unix:PATH, "
                      "comma-separated)"),
                  spec.usage, 2, exit_code);
    }
    // A file without a coordinator: the leases last what the replicas'
    // silence did (liveness.lease_seconds), within the coordinator's range.
    if (!had) {
      config->coordination.lease_seconds = std::clamp(
          static_cast<int>(std::ceil(config->liveness.lease_seconds)), 2, 600);
    }
  }
  // A worker finds servers registered in etcd (a server listens where
  // --listen says, or on every interface).
  if (config->servers_from_etcd && !flags->Has("servers") &&
      std::string(spec.id_flag) == "rank") {
    if (absl::Status s = ResolveEtcdServers(&*config, kFindServersFor);
        !s.ok()) {
      return Fail(spec.program, s, nullptr, 1, exit_code);
    }
  }
  if (config->servers_from_slurm && !flags->Has("servers") &&
      !flags->Has("listen")) {
    if (absl::Status s = ResolveSlurmServers(&*config, ProcessEnv()); !s.ok()) {
      return Fail(spec.program, s, nullptr, 1, exit_code);
    }
  }
  start.flags = *std::move(flags);
  start.config = *std::move(config);
  start.id = *id;
  return start;
}

}  // namespace paramd
