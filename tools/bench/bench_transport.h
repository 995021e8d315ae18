// paramd-bench's transport section: push, pull and push+pull through real
// paramd servers and gRPC clients over loopback, N worker threads x M
// servers in this process, or (--server_processes) in paramd-server
// processes of their own, as a cluster runs them — on other hosts too,
// where the workers may be processes of their own on hosts of their own
// (worker_processes.h).
#ifndef PARAMD_TOOLS_BENCH_BENCH_TRANSPORT_H_
#define PARAMD_TOOLS_BENCH_BENCH_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "tools/bench/bench_worker.h"
#include "tools/bench/server_processes.h"

namespace paramd {

struct TransportOptions {
  int workers = 1;
  int servers = 1;
  int64_t chunk_bytes = 1 << 20;
  std::string policy = "async";
  double seconds = 0.6;
  // worker.shared_memory: the bytes of same-host steps through shared
  // memory (the workers' default), or by the socket (--socket_only).
  bool shared_memory = true;
  // replication.factor (--replicas): 2 runs a backup beside every server,
  // which holds each step before it is acknowledged.
  int replicas = 1;
  // limits.stream_window_kb (--stream_window_kb): 0, gRPC's adaptive
  // windows; else the steps' streams' fixed window, in KiB.
  int64_t stream_window_kb = 0;
  // Where the backups listen once started (filled by RunTransport).
  std::vector<std::string> backups;
  // Non-empty: the servers run as this paramd-server binary, one process
  // per shard (--server_processes), with their job files and port files
  // in `dir`; empty: in this process. In this process the servers' gRPC
  // threads poll the clients' events too (gRPC's poller is one per
  // process), so the clients' own threading shows only with processes.
  std::string server_binary;
  std::string dir;
  // With server_binary: the servers on other hosts (--server_hosts,
  // --server_launch), this process's workers reaching them by their links.
  RemoteHosts server_hosts;
  // With server_binary: the workers as paramd-bench processes of their
  // own on other hosts (--worker_hosts, --worker_launch; rank R on host R
  // % N), this program being `bench_binary`; empty: threads of this
  // process.
  RemoteHosts worker_hosts;
  std::string bench_binary;
};

struct TransportResult {
  int64_t ops = 0;
  double ops_per_second = 0;    // All workers together.
  double bytes_per_second = 0;  // All workers together, both directions.
  double p50 = 0, p99 = 0;      // Seconds per operation.
  // Workers as processes (worker_hosts): the host name each ran on.
  std::vector<std::string> worker_hosts;
};

// Throughput and latency of every worker's operations in `mode` on
// `config`'s model over `elapsed` seconds; the first worker's failure, if
// any.
absl::StatusOr<TransportResult> Summarize(const std::vector<WorkerRun>& runs,
                                          const JobConfig& config, Mode mode,
                                          double elapsed);

// `mode` with a model of `bytes` of parameters, for about o.seconds (each
// worker does at least a few operations).
absl::StatusOr<TransportResult> RunTransport(int64_t bytes, Mode mode,
                                             const TransportOptions& o);

// As RunTransport, but the job is `config` (its num_workers
// worker threads) and its servers are already at `addresses` (in this
// process or not); `during`, when set, runs about every 100 ms of the
// timed part, on this thread.
absl::StatusOr<TransportResult> RunClients(
    const JobConfig& config, const std::vector<std::string>& addresses,
    Mode mode, const TransportOptions& o,
    const std::function<void()>& during = {});

// The job RunTransport runs for `bytes` under `o` as a job file (for
// servers in processes of their own): the same bytes, its layer in a shape
// job files accept (widths up to 2^20).
std::string BenchJobYaml(int64_t bytes, const TransportOptions& o);

// What the goals read from a transport section (-1: not run).
struct TransportGoals {
  double pushpull_16m_of_tcp = -1;  // 1x1
  double pushpull_4k_p50 = -1;      // 1x1, seconds
};

// Runs and prints every size and mode for o.workers x o.servers, against
// raw TCP's `tcp_bps`; fills `goals` from the 1x1 shape.
absl::Status RunTransportSection(const TransportOptions& o,
                                 const std::vector<int64_t>& sizes,
                                 const std::vector<Mode>& modes, double tcp_bps,
                                 TransportGoals* goals);

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_BENCH_TRANSPORT_H_
