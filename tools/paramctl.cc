// paramctl: run, validate and inspect paramd jobs.
//
//   paramctl run J.yaml [--make-secrets] [--summary PATH] [--log_level LEVEL]
//   paramctl validate J.yaml
//   paramctl status --job J.yaml [--servers HOST:PORT,...] [--json] [--watch]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/job_config.h"
#include "common/job_file.h"
#include "common/model_spec.h"
#include "common/partitioner.h"
#include "tools/binaries.h"
#include "tools/job_runner.h"
#include "tools/status_client.h"

namespace paramd {
namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  paramctl run J.yaml [--make-secrets] [--summary PATH] "
    "[--log_level LEVEL]\n"
    "               [--server_binary PATH] [--worker_binary PATH]\n"
    "  paramctl validate J.yaml\n"
    "  paramctl status --job J.yaml [--servers HOST:PORT,...] [--json] "
    "[--watch]\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "paramctl: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

int Validate(const std::string& path) {
  absl::StatusOr<JobConfig> config = LoadJobConfig(path);
  if (!config.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  const ModelSpec spec = BuildModelSpec(config->model);
  absl::StatusOr<PartitionPlan> plan =
      PartitionPlan::Build(spec, config->chunk_bytes, config->num_shards());
  if (!plan.ok()) {
    std::fprintf(stderr, "paramctl: %s: %s\n", path.c_str(),
                 std::string(plan.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> shard_bytes;
  for (int s = 0; s < plan->num_shards(); ++s) {
    shard_bytes.push_back(std::to_string(plan->BytesOnShard(s)));
  }
  std::printf(
      "%s: ok\n  job '%s', policy %s, %d server(s), %d worker(s), %d "
      "epoch(s) of batch %d\n  model mlp %s: %lld parameters in %zu chunk(s); "
      "bytes per shard: %s\n",
      path.c_str(), config->job_id.c_str(), PolicyName(config->policy.type),
      config->num_shards(), config->num_workers, config->training.epochs,
      config->training.batch_size,
      absl::StrJoin(config->model.layers, "-").c_str(),
      static_cast<long long>(spec.total_elements), plan->chunks().size(),
      absl::StrJoin(shard_bytes, ", ").c_str());
  return 0;
}

int Status(const ParsedFlags& flags) {
  if (!flags.Has("job")) return Usage("status needs --job J.yaml");
  absl::StatusOr<JobConfig> config = LoadJobConfig(flags.Get("job", ""));
  if (!config.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  std::vector<std::string> addresses = config->servers;
  if (flags.Has("servers")) {
    addresses =
        absl::StrSplit(flags.Get("servers", ""), ',', absl::SkipEmpty());
  }
  for (const std::string& a : addresses) {
    if (absl::EndsWith(a, ":0")) {
      std::fprintf(stderr,
                   "paramctl: cluster.servers lists port 0 (%s); pass the "
                   "ports the servers bound with --servers\n",
                   a.c_str());
      return 1;
    }
  }
  absl::StatusOr<JobSecurity> security = LoadSecurity(config->security);
  if (!security.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(security.status().message()).c_str());
    return 1;
  }
  const bool json = flags.Has("json");
  if (flags.Has("watch")) {
    // Refreshes in place every second until interrupted.
    while (true) {
      const std::vector<ServerStatus> servers =
          QueryAllStatus(addresses, *security, absl::Seconds(1));
      std::printf("\033[H\033[2J%s", json ? FormatStatusJson(servers).c_str()
                                          : FormatStatusTable(servers).c_str());
      std::fflush(stdout);
      absl::SleepFor(absl::Seconds(1));
    }
  }
  const std::vector<ServerStatus> servers =
      QueryAllStatus(addresses, *security, absl::Seconds(3));
  std::fputs(json ? FormatStatusJson(servers).c_str()
                  : FormatStatusTable(servers).c_str(),
             stdout);
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) return 1;
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv,
                 {"summary", "log_level", "job", "servers", "server_binary",
                  "worker_binary"},
                 {"json", "watch", "make-secrets"});
  if (!flags.ok()) return Usage(std::string(flags.status().message()));
  const std::vector<std::string>& args = flags->positional;
  if (args.empty()) return Usage("no command given");
  const std::string& command = args[0];
  if (command == "run" || command == "validate") {
    if (args.size() != 2) return Usage(command + " takes one job file");
    if (command == "validate") return Validate(args[1]);
    RunOptions options;
    options.job_path = args[1];
    options.summary_path = flags->Get("summary", "");
    options.log_level = flags->Get("log_level", "info");
    options.make_secrets = flags->Has("make-secrets");
    options.server_binary =
        flags->Get("server_binary", FindBinary("paramd-server", "server"));
    options.worker_binary =
        flags->Get("worker_binary", FindBinary("paramd-worker", "worker"));
    return RunJob(options);
  }
  if (command == "status") return Status(*flags);
  return Usage("unknown command '" + command + "'");
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
