// paramd-bench: how close paramd's transport and optimizers run to what
// this machine allows.
//
// In one run it measures
//  - the ceilings (bench_ceilings.h): memcpy bandwidth, an in-place axpy's
//    memory traffic, and raw TCP throughput over loopback (one plain
//    socket pair, plus a 4 KB ping-pong round trip);
//  - push, pull and push+pull through real paramd servers and clients over
//    gRPC on loopback (bench_transport.h; N worker threads x M servers in
//    this process, for each cluster shape asked for), payloads of
//    4 KB ... 64 MB per worker: aggregate GB/s, as a fraction of raw TCP,
//    and the latency of one operation (p50, p99);
//  - every optimizer's apply throughput at 1M, 16M and 64M parameters, as a
//    fraction of the memory-bandwidth bound for the bytes it must touch
//    (bench_optimizers.h);
// and ends with paramd's performance targets (docs/performance.md), each
// met or missed by how much.
//
//   bazel run //tools:paramd-bench -- [--clusters 1x1,2x2]
//       [--sizes 4K,64K,1M,16M,64M] [--modes push,pull,push+pull]
//       [--seconds S] [--chunk_bytes B] [--policy async|sync]
//       [--optimizer_sizes 1M,16M,64M] [--skip_transport] [--skip_optimizers]
//       [--replicas 1|2] [--socket_only] [--stream_window_kb K]
//       [--server_processes [--server_binary PATH]
//        [--server_hosts A,B,... --server_launch 'PREFIX {host}']
//        [--worker_hosts A,B,... --worker_launch 'PREFIX {addr}']]
//
// --replicas 2: every server has a backup holding each step before it is
// acknowledged (replication.factor 2), for its cost.
// --stream_window_kb: the job's limits.stream_window_kb (a fixed HTTP/2
// window for the steps' streams; docs/job-file.md).
// --socket_only: every step's bytes by the socket (worker.shared_memory:
// off), where by default a StepStream step's chunk bytes go through shared
// memory (the bench's servers are on its host).
// --server_processes: the servers as paramd-server processes, one per
// shard (as a cluster and ps-lite's bench run them), instead of in this
// process, where their gRPC threads also poll the clients' events.
// --server_hosts / --server_launch: those processes on other hosts, shard
// K on host K % N listening at its address, each started as PREFIX (with
// {host} replaced by the host's index) followed by its command line; e.g.
// --server_hosts 198.18.0.1,198.18.0.2 --server_launch
// 'scripts/hosts.sh run SET {host}' with this bench run on a third host
// (scripts/cross-host-transport.sh does this, beside ps-lite).
// --worker_hosts / --worker_launch: the workers too as processes, rank R
// on host R % N, each started as PREFIX ({host}: the host's index in the
// list, {addr}: its address) followed by this bench's command line for one
// worker (paramd-bench --bench_worker ...; tools/bench/worker_processes.h),
// so that each worker's link carries only its own bytes.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/binaries.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/process_setup.h"
#include "common/base/status_macros.h"
#include "common/config/job_config.h"
#include "tools/bench/bench_ceilings.h"
#include "tools/bench/bench_optimizers.h"
#include "tools/bench/bench_transport.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/worker_processes.h"

namespace paramd {
namespace {

struct BenchOptions {
  TransportOptions transport;
  std::vector<std::pair<int, int>> clusters;  // (workers, servers)
  std::vector<int64_t> sizes;
  std::vector<Mode> modes;
  std::vector<int64_t> optimizer_sizes;
  bool skip_transport = false;
  bool skip_optimizers = false;
};

// "NxM,...": N workers, M servers.
absl::StatusOr<std::vector<std::pair<int, int>>> ParseClusters(
    const std::string& text) {
  std::vector<std::pair<int, int>> clusters;
  for (absl::string_view c : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> nm = absl::StrSplit(c, 'x');
    int n = 0, m = 0;
    if (nm.size() != 2 || !absl::SimpleAtoi(nm[0], &n) ||
        !absl::SimpleAtoi(nm[1], &m) || n < 1 || m < 1 || n > 64 || m > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("--clusters: '", std::string(c),
                       "' is not WORKERSxSERVERS (e.g. 2x2, each 1-64)"));
    }
    clusters.emplace_back(n, m);
  }
  return clusters;
}

// --server_processes and what goes with it: the binary, the hosts, the
// folder for the job and port files.
absl::Status ParseServerProcesses(const ParsedFlags& flags,
                                  TransportOptions* t) {
  if (flags.Has("server_processes")) {
    if (t->replicas > 1) {
      return absl::InvalidArgumentError(
          "--server_processes starts no backups: leave out --replicas 2");
    }
    t->server_binary =
        flags.Get("server_binary", FindBinary("paramd-server", "server"));
    absl::StatusOr<RemoteHosts> where = RemoteHostsFromFlags(flags, "server");
    if (!where.ok()) return where.status();
    t->server_hosts = *std::move(where);
    ASSIGN_OR_RETURN(t->worker_hosts, RemoteHostsFromFlags(flags, "worker"));
    t->bench_binary = FindBinary("paramd-bench", "tools");
    t->dir = (std::filesystem::temp_directory_path() /
              absl::StrCat("paramd-bench-", getpid()))
                 .string();
    std::error_code error;
    std::filesystem::create_directories(t->dir, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat(t->dir, ": ", error.message()));
    }
  } else if (flags.Has("server_binary") || flags.Has("server_hosts") ||
             flags.Has("server_launch") || flags.Has("worker_hosts") ||
             flags.Has("worker_launch")) {
    return absl::InvalidArgumentError(
        "--server_binary, --server_hosts, --server_launch, --worker_hosts, "
        "--worker_launch: only with --server_processes");
  }
  return absl::OkStatus();
}

absl::StatusOr<BenchOptions> ParseOptions(const ParsedFlags& flags) {
  BenchOptions o;
  ASSIGN_OR_RETURN(const int chunk, flags.GetInt("chunk_bytes", 1 << 20));
  if (chunk < 4096) {
    return absl::InvalidArgumentError("--chunk_bytes: must be >= 4096");
  }
  o.transport.chunk_bytes = chunk;
  ASSIGN_OR_RETURN(o.clusters, ParseClusters(flags.Get("clusters", "1x1,2x2")));
  o.transport.policy = flags.Get("policy", "async");
  if (o.transport.policy != "async" && o.transport.policy != "sync") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--policy: '", o.transport.policy, "' is not async or sync"));
  }
  if (!absl::SimpleAtod(flags.Get("seconds", "0.6"), &o.transport.seconds) ||
      o.transport.seconds <= 0) {
    return absl::InvalidArgumentError("--seconds: not a positive number");
  }
  ASSIGN_OR_RETURN(
      o.sizes, ParseSizes("sizes", flags.Get("sizes", "4K,64K,1M,16M,64M")));
  ASSIGN_OR_RETURN(o.optimizer_sizes,
                   ParseSizes("optimizer_sizes",
                              flags.Get("optimizer_sizes", "1M,16M,64M")));
  ASSIGN_OR_RETURN(o.modes,
                   ParseModes(flags.Get("modes", "push,pull,push+pull")));
  o.skip_transport = flags.Has("skip_transport");
  o.skip_optimizers = flags.Has("skip_optimizers");
  ASSIGN_OR_RETURN(o.transport.replicas, flags.GetInt("replicas", 1));
  if (o.transport.replicas < 1 || o.transport.replicas > 2) {
    return absl::InvalidArgumentError(
        "--replicas: 1 (no backups) or 2 (a backup per server)");
  }
  o.transport.shared_memory = !flags.Has("socket_only");
  ASSIGN_OR_RETURN(o.transport.stream_window_kb,
                   flags.GetInt("stream_window_kb", 0));
  if (!LimitsConfig::ValidStreamWindow(o.transport.stream_window_kb)) {
    return absl::InvalidArgumentError(
        "--stream_window_kb: 0 (gRPC's adaptive windows) or 64 to 1048576");
  }
  RETURN_IF_ERROR(ParseServerProcesses(flags, &o.transport));
  return o;
}

void PrintGoals(const TransportGoals& transport,
                const std::vector<std::pair<std::string, double>>& optimizers) {
  std::printf("Goals\n");
  auto line = [](const std::string& what, bool met, const std::string& got) {
    std::printf("  %-48s %-6s %s\n", what.c_str(), met ? "met" : "MISSED",
                got.c_str());
  };
  const double fraction = transport.pushpull_16m_of_tcp;
  if (fraction >= 0) {
    line("push+pull 16M (1x1) >= 50% of raw TCP", fraction >= 0.5,
         absl::StrCat(static_cast<int>(fraction * 1000) / 10.0, "%"));
  } else {
    std::printf("  push+pull 16M (1x1): not run with these settings\n");
  }
  const double p50 = transport.pushpull_4k_p50;
  if (p50 >= 0) {
    line("push+pull 4K (1x1) p50 <= 250 us", p50 <= 250e-6,
         absl::StrCat(static_cast<int>(p50 * 1e7) / 10.0, " us"));
  } else {
    std::printf("  push+pull 4K (1x1): not run with these settings\n");
  }
  for (const auto& [name, f] : optimizers) {
    line(absl::StrCat(name, " 16M >= 50% of its bandwidth bound"), f >= 0.5,
         absl::StrCat(static_cast<int>(f * 1000) / 10.0, "%"));
  }
}

absl::Status Run(const BenchOptions& o) {
  const auto bench_start = SteadyClock::now();
  ASSIGN_OR_RETURN(const Ceilings ceilings, MeasureCeilings());
  TransportGoals transport_goals;
  for (const auto& [workers, servers] : o.clusters) {
    if (o.skip_transport) break;
    TransportOptions t = o.transport;
    t.workers = workers;
    t.servers = servers;
    RETURN_IF_ERROR(RunTransportSection(t, o.sizes, o.modes, ceilings.tcp_bps,
                                        &transport_goals));
  }
  std::vector<std::pair<std::string, double>> optimizer_goals;
  if (!o.skip_optimizers) {
    // The higher of the two measured memory-traffic rates.
    const double bandwidth =
        std::max(2 * ceilings.memcpy_bps, ceilings.axpy_bps);
    RETURN_IF_ERROR(
        RunOptimizerSection(o.optimizer_sizes, bandwidth, &optimizer_goals));
  }
  PrintGoals(transport_goals, optimizer_goals);
  std::printf("\nparamd-bench took %.1f s\n", Since(bench_start));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  SetUpProcess();
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "paramd-bench: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  };
  std::set<std::string> valued = {
      "clusters",     "sizes",         "modes",           "seconds",
      "chunk_bytes",  "policy",        "optimizer_sizes", "log_level",
      "replicas",     "server_binary", "server_hosts",    "server_launch",
      "worker_hosts", "worker_launch", "stream_window_kb"};
  for (const std::string& f : BenchWorkerFlags()) valued.insert(f);
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, valued,
                 {"skip_transport", "skip_optimizers", "socket_only",
                  "server_processes", "bench_worker"});
  if (!flags.ok()) return fail(flags.status());
  if (absl::Status s =
          InitLogging("paramd-bench", flags->Get("log_level", "warn"));
      !s.ok()) {
    return fail(s);
  }
  // One worker of a bench whose workers are processes (worker_processes.h).
  if (flags->Has("bench_worker")) return BenchWorkerMain(*flags);
  absl::StatusOr<BenchOptions> options = ParseOptions(*flags);
  if (!options.ok()) return fail(options.status());
  const absl::Status s = Run(*options);
  if (!options->transport.dir.empty()) {
    // The servers' job and port files (--server_processes).
    std::error_code ignored;
    std::filesystem::remove_all(options->transport.dir, ignored);
  }
  if (!s.ok()) return fail(s);
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
