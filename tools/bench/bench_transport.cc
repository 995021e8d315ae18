#include "tools/bench/bench_transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "common/base/status_macros.h"
#include "common/config/job_config.h"
#include "common/config/job_file.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "server/rpc/parameter_server.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/server_processes.h"
#include "tools/bench/worker_processes.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

// A job whose model is `bytes` of float parameters: fc1 = 1 x K weights
// plus K biases, K = bytes / 8. Plain SGD (no slots), so the server's
// update is the cheapest a real job has.
JobConfig BenchJob(int64_t bytes, const TransportOptions& o) {
  JobConfig config;
  config.path = "paramd-bench";
  config.job_id = "paramd-bench";
  config.servers.assign(o.servers, "127.0.0.1:0");
  config.num_workers = o.workers;
  config.model.layers = {1, static_cast<int>(std::max<int64_t>(1, bytes / 8))};
  config.training.epochs = 1;
  config.training.batch_size = 1;
  config.optimizer.type = "sgd";
  config.optimizer.learning_rate = 1e-6;
  config.policy.type =
      o.policy == "sync" ? PolicyType::kSync : PolicyType::kAsync;
  config.liveness.lease_seconds = 3600;  // No heartbeats in the bench.
  config.liveness.stall_warn_seconds = 3600;
  config.chunk_bytes = o.chunk_bytes;
  config.worker.shared_memory = o.shared_memory;
  config.limits.stream_window_kb = o.stream_window_kb;
  if (o.replicas > 1) {
    config.replication.factor = 2;
    config.replication.backups.assign(o.servers, "127.0.0.1:0");
  }
  return config;
}

class BenchCluster {
 public:
  static absl::StatusOr<std::unique_ptr<BenchCluster>> Start(
      const JobConfig& config) {
    auto cluster = std::unique_ptr<BenchCluster>(new BenchCluster());
    const bool replicated = config.replication.enabled();
    for (bool backup : {false, true}) {
      if (backup && !replicated) break;
      for (int k = 0; k < config.num_shards(); ++k) {
        ShardOptions options;
        options.backup = backup;
        auto server = ParameterServer::Create(config, k, nullptr, options);
        if (!server.ok()) return server.status();
        ASSIGN_OR_RETURN(int port, (*server)->Start("127.0.0.1:0"));
        (backup ? cluster->backups_ : cluster->addresses_)
            .push_back(absl::StrCat("127.0.0.1:", port));
        cluster->servers_.push_back(*std::move(server));
      }
    }
    // Each backup, then each primary, told the other's address.
    const int n = config.num_shards();
    for (int k = 0; replicated && k < n; ++k) {
      RETURN_IF_ERROR(cluster->servers_[n + k]->StartReplica(
          cluster->backups_[k], cluster->addresses_[k]));
      RETURN_IF_ERROR(cluster->servers_[k]->StartReplica(cluster->addresses_[k],
                                                         cluster->backups_[k]));
    }
    return cluster;
  }
  ~BenchCluster() {
    for (auto& s : servers_) s->Shutdown();
    for (auto& s : servers_) s->Wait();
  }
  const std::vector<std::string>& addresses() const { return addresses_; }
  const std::vector<std::string>& backups() const { return backups_; }

 private:
  BenchCluster() = default;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::vector<std::string> addresses_, backups_;
};

// The timed part of worker threads of one run: they start together once
// all warmed up, and stop when the run's thread says.
class ThreadGate final : public RunGate {
 public:
  explicit ThreadGate(int workers) : ready_(new absl::Barrier(workers + 1)) {}
  void Ready() override {
    if (ready_->Block()) delete ready_;
    while (!go_.load()) std::this_thread::yield();
  }
  bool Stopped() override { return stop_.load(std::memory_order_relaxed); }
  // The run's thread: once every worker warmed up, begins the timed part.
  void Start() {
    if (ready_->Block()) delete ready_;
    go_.store(true);
  }
  void Stop() { stop_.store(true); }

 private:
  absl::Barrier* ready_;  // Deleted by the last thread through it.
  std::atomic<bool> go_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace

absl::StatusOr<TransportResult> Summarize(const std::vector<WorkerRun>& runs,
                                          const JobConfig& config, Mode mode,
                                          double elapsed) {
  // An operation moves the model's bytes once (push, pull) or both ways.
  const FlatLayout layout(BuildModelSpec(config.model));
  const double bytes_per_op =
      static_cast<double>(layout.total * kElementBytes) *
      (mode == Mode::kPushPull ? 2 : 1);
  TransportResult result;
  std::vector<double> all;
  for (const WorkerRun& r : runs) {
    RETURN_IF_ERROR(r.status);
    result.ops += static_cast<int64_t>(r.latencies.size());
    all.insert(all.end(), r.latencies.begin(), r.latencies.end());
  }
  result.ops_per_second = static_cast<double>(result.ops) / elapsed;
  result.bytes_per_second = bytes_per_op * result.ops_per_second;
  result.p50 = Percentile(all, 50);
  result.p99 = Percentile(all, 99);
  return result;
}

absl::StatusOr<TransportResult> RunClients(
    const JobConfig& config, const std::vector<std::string>& addresses,
    Mode mode, const TransportOptions& o, const std::function<void()>& during) {
  const ModelSpec spec = BuildModelSpec(config.model);
  ASSIGN_OR_RETURN(
      PartitionPlan plan,
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
  const FlatLayout layout(spec);
  const int workers = config.num_workers;
  std::vector<WorkerRun> runs(workers);
  ThreadGate gate(workers);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < workers; ++rank) {
    threads.emplace_back([&, rank] {
      RunWorker(ClientSetup{&config, &plan, &layout, rank}, addresses,
                o.backups, mode, gate, runs[rank]);
    });
  }
  gate.Start();
  const auto start = SteadyClock::now();
  // Each worker goes on after `seconds` until it did kMinOps operations.
  for (double left = o.seconds; left > 0; left = o.seconds - Since(start)) {
    if (during) during();
    std::this_thread::sleep_for(
        std::chrono::duration<double>(std::min(left, 0.1)));
  }
  if (during) during();
  gate.Stop();
  for (std::thread& t : threads) t.join();
  return Summarize(runs, config, mode, Since(start));
}

namespace {

// RunTransport with the servers as paramd-server processes (one per shard)
// of the job BenchJobYaml writes: the same bytes and settings.
absl::StatusOr<TransportResult> RunTransportApart(int64_t bytes, Mode mode,
                                                  const TransportOptions& o) {
  if (o.replicas > 1) {
    return absl::InvalidArgumentError(
        "--server_processes starts no backups: leave out --replicas");
  }
  const std::string tag =
      absl::StrCat(SizeName(bytes), "-", o.workers, "x", o.servers, "-",
                   mode == Mode::kPushPull ? "pushpull" : ModeName(mode));
  const std::string job_path = absl::StrCat(o.dir, "/", tag, ".yaml");
  std::ofstream(job_path) << BenchJobYaml(bytes, o);
  // The servers and the clients read the same file.
  ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(job_path));
  config.worker.shared_memory = o.shared_memory;  // The workers' side only.
  ASSIGN_OR_RETURN(
      std::unique_ptr<ServerProcesses> servers,
      ServerProcesses::Start(o.server_binary, job_path, o.servers, o.dir, tag,
                             absl::Seconds(60), &o.server_hosts));
  auto during = [&] { (void)servers->Poll(absl::ZeroDuration()); };
  if (!o.worker_hosts.empty()) {
    return RunWorkerProcesses(job_path, config, servers->addresses(), mode, o,
                              during);
  }
  return RunClients(config, servers->addresses(), mode, o, during);
}

}  // namespace

absl::StatusOr<TransportResult> RunTransport(int64_t bytes, Mode mode,
                                             const TransportOptions& o) {
  if (!o.server_binary.empty()) return RunTransportApart(bytes, mode, o);
  const JobConfig config = BenchJob(bytes, o);
  ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster,
                   BenchCluster::Start(config));
  TransportOptions with = o;
  with.backups = cluster->backups();
  return RunClients(config, cluster->addresses(), mode, with);
}

std::string BenchJobYaml(int64_t bytes, const TransportOptions& o) {
  const JobConfig c = BenchJob(bytes, o);
  std::vector<std::string> servers(o.servers, "\"127.0.0.1:0\"");
  // The same bytes as BenchJob's 1 x K layer, in a shape a job file
  // accepts (layer widths up to 2^20): `in` x K' weights plus K' biases.
  const int64_t floats = std::max<int64_t>(2, bytes / 4);
  int64_t in = 1;
  while (floats / (in + 1) > (int64_t{1} << 20)) in = 2 * in + 1;
  const std::vector<int64_t> layers = {in, floats / (in + 1)};
  return absl::StrCat(
      "job:\n  id: ", c.job_id, "\n", "cluster:\n  servers: [",
      absl::StrJoin(servers, ", "), "]\n  workers: ", c.num_workers, "\n",
      "model:\n  type: mlp\n  layers: [", absl::StrJoin(layers, ", "), "]\n",
      "training:\n  epochs: 1\n  batch_size: 1\n",
      "optimizer:\n  type: sgd\n  learning_rate: ", c.optimizer.learning_rate,
      "\n", "policy:\n  type: ", o.policy, "\n",
      "liveness:\n  lease_seconds: ", c.liveness.lease_seconds,
      "\n  stall_warn_seconds: ", c.liveness.stall_warn_seconds, "\n",
      "partition:\n  chunk_bytes: ", c.chunk_bytes, "\n",
      o.stream_window_kb > 0
          ? absl::StrCat("limits:\n  stream_window_kb: ", o.stream_window_kb,
                         "\n")
          : "");
}

absl::Status RunTransportSection(const TransportOptions& o,
                                 const std::vector<int64_t>& sizes,
                                 const std::vector<Mode>& modes, double tcp_bps,
                                 TransportGoals* goals) {
  const bool apart = !o.server_hosts.empty();
  bool hosts_shown = false;
  std::printf(
      "Transport: %d worker(s) x %d server(s)%s%s, gRPC %s, policy %s, "
      "chunk_bytes %s\n",
      o.workers, o.servers, o.replicas > 1 ? " each with a backup" : "",
      o.server_binary.empty() ? "" : " (paramd-server processes)",
      apart ? absl::StrCat("to servers at ",
                           absl::StrJoin(o.server_hosts.hosts, ", "))
                  .c_str()
            : "over loopback",
      o.policy.c_str(), SizeName(o.chunk_bytes).c_str());
  std::printf("  %-10s %8s %7s %9s %8s %10s %10s\n", "mode", "size", "ops",
              "GB/s", "of TCP", "p50 ms", "p99 ms");
  for (int64_t size : sizes) {
    for (Mode mode : modes) {
      absl::StatusOr<TransportResult> r = RunTransport(size, mode, o);
      if (!r.ok()) {
        return absl::Status(r.status().code(),
                            absl::StrCat(ModeName(mode), " ", SizeName(size),
                                         ": ", r.status().message()));
      }
      const double of_tcp = r->bytes_per_second / tcp_bps;
      std::printf("  %-10s %8s %7lld %9.3f %7.1f%% %10.3f %10.3f\n",
                  ModeName(mode), SizeName(size).c_str(),
                  static_cast<long long>(r->ops), r->bytes_per_second / 1e9,
                  100 * of_tcp, r->p50 * 1e3, r->p99 * 1e3);
      if (!r->worker_hosts.empty() && !hosts_shown) {
        std::printf("  (workers as processes on %s)\n",
                    absl::StrJoin(r->worker_hosts, ", ").c_str());
        hosts_shown = true;
      }
      std::fflush(stdout);
      if (mode == Mode::kPushPull && o.workers == 1 && o.servers == 1) {
        if (size == (16 << 20)) goals->pushpull_16m_of_tcp = of_tcp;
        if (size == 4096) goals->pushpull_4k_p50 = r->p50;
      }
    }
  }
  std::printf(
      "  (GB/s counts the bytes of every worker; push+pull moves "
      "the payload both ways)\n\n");
  return absl::OkStatus();
}

}  // namespace paramd
