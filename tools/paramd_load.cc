// paramd-load: a no-lost-update load test. Many concurrent workers push
// known gradients to paramd-server processes under each policy, with plain
// SGD (learning rate 1, no momentum), while the servers delay and drop
// replies on purpose (testing.delay_reply_ms, drop_reply_probability) so
// that pushes and pulls are retried. Then every parameter must equal the
// exact expected value, and every shard must count exactly the pushes the
// workers saw acknowledged: nothing lost, nothing applied twice.
//
//   bazel run -c opt //tools:paramd-load -- [--policy all|sync|async|ssp]
//       [--seconds 60] [--workers 32] [--servers 2] [--drop_percent 2]
//       [--delay_ms 5] [--layers 512,128]
//       [--server_hosts A,B,... --server_launch 'PREFIX {host}']
//
// --server_hosts / --server_launch: the servers on other hosts, shard K on
// host K mod N, each started behind PREFIX with {host} its index (e.g.
// 'scripts/hosts.sh run SET {host}'), listening at its host's address;
// this process's workers reach them by their links.
//
// Exactness: the workers first make every parameter exactly 0 (each pushes
// the initial values at clock 0 under sync, whose mean is those values;
// rank 0 alone under async and ssp, the others push zeros), and wait for
// each other. From clock 1 on, rank r's gradient for element i at clock c
// is (r + 1) * (c + i even ? 2 : -1): integers, whose sums and sync means
// (divided by a power of two) float32 holds exactly. Sync runs stop every
// worker at one clock, so each round has every rank's push.
//
// Prints per policy: steps and shard pushes per second, retries, retried
// pushes found applied (duplicates), each server's peak RSS, and the check.
// Exits 1 when a check fails.
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/binaries.h"
#include "common/base/flags.h"
#include "common/base/process_setup.h"
#include "common/config/job_config.h"
#include "common/config/job_file.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tools/load/rpc/load_run.h"

namespace paramd {
namespace {

// The flags as LoadOptions; an error names the flag.
absl::StatusOr<LoadOptions> ParseLoadOptions(const ParsedFlags& flags) {
  LoadOptions o;
  absl::StatusOr<int> seconds = flags.GetInt("seconds", 60);
  absl::StatusOr<int> workers = flags.GetInt("workers", 32);
  absl::StatusOr<int> servers = flags.GetInt("servers", 2);
  absl::StatusOr<int> drop = flags.GetInt("drop_percent", 2);
  absl::StatusOr<int> delay = flags.GetInt("delay_ms", 5);
  for (const auto* v : {&seconds, &workers, &servers, &drop, &delay}) {
    if (!v->ok()) return v->status();
  }
  o.seconds = *seconds;
  o.workers = *workers;
  o.servers = *servers;
  o.drop = *drop / 100.0;
  o.delay_ms = *delay;
  if (o.workers < 1 || o.servers < 1 || o.seconds < 1 || *drop < 0 ||
      *drop > 50) {
    return absl::InvalidArgumentError(
        "--workers, --servers and --seconds must be >= 1, --drop_percent in "
        "[0, 50]");
  }
  if (flags.Has("layers")) {
    o.layers.clear();
    for (absl::string_view w : absl::StrSplit(flags.Get("layers", ""), ',')) {
      int width = 0;
      if (!absl::SimpleAtoi(w, &width) || width < 1) {
        return absl::InvalidArgumentError(
            "--layers: expected widths, e.g. 512,128");
      }
      o.layers.push_back(width);
    }
  }
  o.server_binary =
      flags.Get("server_binary", FindBinary("paramd-server", "server"));
  absl::StatusOr<RemoteHosts> where = RemoteHostsFromFlags(flags, "server");
  if (!where.ok()) return where.status();
  o.server_hosts = *std::move(where);
  return o;
}

int Main(int argc, char** argv) {
  SetUpProcess();
  absl::StatusOr<ParsedFlags> flags = ParseFlags(
      argc, argv,
      {"policy", "seconds", "workers", "servers", "drop_percent", "delay_ms",
       "layers", "server_binary", "server_hosts", "server_launch"},
      {});
  absl::StatusOr<LoadOptions> options =
      flags.ok() ? ParseLoadOptions(*flags) : flags.status();
  if (!options.ok()) {
    std::fprintf(stderr, "paramd-load: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  LoadOptions& o = *options;
  char tmpl[] = "/tmp/paramd-load-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "paramd-load: cannot make a scratch folder\n");
    return 1;
  }
  o.dir = tmpl;
  signal(SIGPIPE, SIG_IGN);
  const std::string which = flags->Get("policy", "all");
  std::vector<std::string> policies = {"sync", "async", "ssp"};
  if (which != "all") policies = {which};
  bool ok = true;
  for (const std::string& policy : policies) {
    o.policy = policy;
    const std::string path = absl::StrCat(o.dir, "/", policy, ".yaml");
    std::ofstream(path) << LoadJobYaml(o);
    absl::StatusOr<JobConfig> config = LoadJobConfig(path);
    if (!config.ok()) {
      std::fprintf(stderr, "paramd-load: %s\n",
                   std::string(config.status().message()).c_str());
      return 2;
    }
    absl::StatusOr<PartitionPlan> plan =
        PartitionPlan::Build(BuildModelSpec(config->model), config->chunk_bytes,
                             config->num_shards());
    if (!plan.ok()) {
      std::fprintf(stderr, "paramd-load: %s\n",
                   std::string(plan.status().message()).c_str());
      return 2;
    }
    ok = RunLoad(o, *std::move(config), *std::move(plan)) && ok;
    std::fflush(stdout);
  }
  std::error_code ignored;
  std::filesystem::remove_all(o.dir, ignored);
  std::printf("paramd-load: %s\n", ok ? "every check passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
