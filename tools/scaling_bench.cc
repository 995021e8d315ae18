// scaling_bench: what a step costs as the workers grow. For each payload
// (default 1 MB and 16 MB per worker) and each count of worker threads
// (default 1, 2, 4, 8, 16), push+pull through 2 paramd-server processes
// over loopback gRPC, the workers' way (a step of each shard's StepStream):
// steps per second, aggregate GB/s (both directions), the latency of one
// step (p50, p99), and for each server process the most threads seen
// during the run and its peak resident set. The servers are processes of
// their own so that their threads and memory are theirs alone.
//
//   bazel run -c opt //tools:scaling_bench -- [--workers 1,2,4,8,16]
//       [--servers 2] [--sizes 1M,16M] [--seconds S] [--policy async|sync]
//       [--chunk_bytes B] [--server_binary PATH] [--dir DIR]
//
// DIR (default: a new folder under the system's temporary folder) holds
// each run's job file and port files.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/binaries.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/process_setup.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "tools/bench/bench_transport.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/proc_status.h"
#include "tools/bench/server_processes.h"

namespace paramd {
namespace {

struct ScalingOptions {
  TransportOptions transport;
  std::vector<int> workers;
  std::vector<int64_t> sizes;
  std::string server_binary;
  std::string dir;
};

absl::StatusOr<std::vector<int>> ParseCounts(const std::string& flag,
                                             const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 256) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(part),
                       "' is not a count in [1, 256]"));
    }
    out.push_back(n);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": no counts"));
  }
  return out;
}

absl::StatusOr<ScalingOptions> ParseOptions(const ParsedFlags& flags) {
  ScalingOptions o;
  ASSIGN_OR_RETURN(o.workers,
                   ParseCounts("workers", flags.Get("workers", "1,2,4,8,16")));
  ASSIGN_OR_RETURN(std::vector<int> servers,
                   ParseCounts("servers", flags.Get("servers", "2")));
  if (servers.size() != 1) {
    return absl::InvalidArgumentError("--servers: one count");
  }
  o.transport.servers = servers[0];
  ASSIGN_OR_RETURN(o.sizes, ParseSizes("sizes", flags.Get("sizes", "1M,16M")));
  ASSIGN_OR_RETURN(const int chunk, flags.GetInt("chunk_bytes", 1 << 20));
  if (chunk < 4096) {
    return absl::InvalidArgumentError("--chunk_bytes: must be >= 4096");
  }
  o.transport.chunk_bytes = chunk;
  o.transport.policy = flags.Get("policy", "async");
  if (o.transport.policy != "async" && o.transport.policy != "sync") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--policy: '", o.transport.policy, "' is not async or sync"));
  }
  if (!absl::SimpleAtod(flags.Get("seconds", "2"), &o.transport.seconds) ||
      o.transport.seconds <= 0) {
    return absl::InvalidArgumentError("--seconds: not a positive number");
  }
  o.server_binary =
      flags.Get("server_binary", FindBinary("paramd-server", "server"));
  if (flags.Has("dir")) {
    o.dir = flags.Get("dir", "");
  } else {
    o.dir = (std::filesystem::temp_directory_path() /
             absl::StrCat("paramd-scaling-", getpid()))
                .string();
  }
  return o;
}

// One row of the table: `workers` threads at `bytes` each.
absl::Status RunRow(const ScalingOptions& o, int64_t bytes, int workers) {
  TransportOptions t = o.transport;
  t.workers = workers;
  const std::string tag = absl::StrCat(SizeName(bytes), "-", workers);
  const std::string job_path = absl::StrCat(o.dir, "/", tag, ".yaml");
  std::ofstream(job_path) << BenchJobYaml(bytes, t);
  // The servers and the clients read the same file.
  ASSIGN_OR_RETURN(const JobConfig config, LoadJobConfig(job_path));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ServerProcesses> servers,
      ServerProcesses::Start(o.server_binary, job_path, t.servers, o.dir, tag));
  std::vector<int64_t> threads(t.servers, 0);
  auto sample = [&] {
    for (int k = 0; k < t.servers; ++k) {
      threads[k] = std::max(threads[k], ThreadCount(servers->pid(k)));
    }
    (void)servers->Poll(absl::ZeroDuration());
  };
  ASSIGN_OR_RETURN(
      const TransportResult r,
      RunClients(config, servers->addresses(), Mode::kPushPull, t, sample));
  std::vector<std::string> thread_text, rss_text;
  for (int k = 0; k < t.servers; ++k) {
    thread_text.push_back(absl::StrCat(threads[k]));
    rss_text.push_back(absl::StrFormat(
        "%.0f",
        static_cast<double>(PeakRssBytes(servers->pid(k))) / (1 << 20)));
  }
  std::printf("  %6s %7d %9.0f %8.3f %9.3f %9.3f %12s %14s\n",
              SizeName(bytes).c_str(), workers, r.ops_per_second,
              r.bytes_per_second / 1e9, r.p50 * 1e3, r.p99 * 1e3,
              absl::StrJoin(thread_text, "/").c_str(),
              absl::StrJoin(rss_text, "/").c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status Run(const ScalingOptions& o) {
  std::error_code error;
  std::filesystem::create_directories(o.dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("--dir: ", o.dir, ": ", error.message()));
  }
  std::printf(
      "Scaling: push+pull, worker threads x %d paramd-server processes, "
      "gRPC over loopback, policy %s, chunk_bytes %s, %.1f s a row\n",
      o.transport.servers, o.transport.policy.c_str(),
      SizeName(o.transport.chunk_bytes).c_str(), o.transport.seconds);
  std::printf("  %6s %7s %9s %8s %9s %9s %12s %14s\n", "size", "workers",
              "steps/s", "GB/s", "p50 ms", "p99 ms", "srv threads",
              "srv peak MiB");
  for (int64_t bytes : o.sizes) {
    for (int workers : o.workers) {
      if (absl::Status s = RunRow(o, bytes, workers); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat(SizeName(bytes), " x ", workers,
                                         " workers: ", s.message()));
      }
    }
  }
  std::printf(
      "  (GB/s counts every worker's bytes both ways; threads: the most "
      "seen in each server during the row; peak: its VmHWM)\n");
  if (!std::filesystem::remove_all(o.dir, error) && error) {
    std::fprintf(stderr, "scaling_bench: %s left behind\n", o.dir.c_str());
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  SetUpProcess();
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "scaling_bench: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  };
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv,
                 {"workers", "servers", "sizes", "seconds", "policy",
                  "chunk_bytes", "server_binary", "dir", "log_level"},
                 {});
  if (!flags.ok()) return fail(flags.status());
  if (absl::Status s =
          InitLogging("scaling_bench", flags->Get("log_level", "warn"));
      !s.ok()) {
    return fail(s);
  }
  absl::StatusOr<ScalingOptions> options = ParseOptions(*flags);
  if (!options.ok()) return fail(options.status());
  if (absl::Status s = Run(*options); !s.ok()) return fail(s);
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
