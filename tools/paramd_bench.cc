// paramd-bench: how close paramd's transport and optimizers run to what
// this machine allows.
//
// In one run it measures
//  - the ceilings: memcpy bandwidth, an in-place axpy's memory traffic,
//    and raw TCP throughput over loopback (one plain socket pair, plus a
//    4 KB ping-pong round trip);
//  - push, pull and push+pull through real paramd servers and clients over
//    gRPC on loopback (N worker threads x M servers in this process, for
//    each cluster shape asked for),
//    payloads of 4 KB ... 64 MB per worker: aggregate GB/s, as a fraction
//    of raw TCP, and the latency of one operation (p50, p99);
//  - every optimizer's apply throughput at 1M, 16M and 64M parameters, as a
//    fraction of the memory-bandwidth bound for the bytes it must touch;
// and ends with the goals, each met or missed by how much.
//
//   bazel run //tools:paramd-bench -- [--clusters 1x1,2x2]
//       [--sizes 4K,64K,1M,16M,64M] [--modes push,pull,push+pull]
//       [--seconds S] [--chunk_bytes B] [--policy async|sync]
//       [--optimizer_sizes 1M,16M,64M] [--skip_transport] [--skip_optimizers]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "common/flags.h"
#include "common/job_config.h"
#include "common/logging.h"
#include "common/model_spec.h"
#include "common/partitioner.h"
#include "common/process_setup.h"
#include "common/status_macros.h"
#include "server/optimizer.h"
#include "server/rpc/parameter_server.h"
#include "tools/bench_timing.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// "4K", "16M", "1G" or a plain number of bytes (or parameters).
absl::StatusOr<std::vector<int64_t>> ParseSizes(const std::string& flag,
                                                const std::string& text) {
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t unit = 1;
    if (!part.empty()) {
      switch (part.back()) {
        case 'K':
        case 'k':
          unit = int64_t{1} << 10;
          break;
        case 'M':
        case 'm':
          unit = int64_t{1} << 20;
          break;
        case 'G':
        case 'g':
          unit = int64_t{1} << 30;
          break;
        default:
          break;
      }
      if (unit != 1) part.remove_suffix(1);
    }
    int64_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(part),
                       "' is not a positive size (e.g. 4K, 16M)"));
    }
    sizes.push_back(n * unit);
  }
  if (sizes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": no sizes"));
  }
  return sizes;
}

std::string SizeName(int64_t n) {
  if (n >= (1 << 20) && n % (1 << 20) == 0) return absl::StrCat(n >> 20, "M");
  if (n >= (1 << 10) && n % (1 << 10) == 0) return absl::StrCat(n >> 10, "K");
  return absl::StrCat(n);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1,
               static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

// ---------------------------------------------------------------------------
// Ceilings.

// Bytes copied per second by memcpy between two 64 MiB buffers (larger
// than any cache here). Memory traffic is twice that: every byte is read
// once and written once.
double MemcpyBytesPerSecond(double seconds) {
  const size_t n = size_t{64} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  const double t = SecondsPerCall(seconds, [&] {
    std::memcpy(b.data(), a.data(), n);
    a[0] = b[n - 1];  // Keep the copies from being elided.
    return true;
  });
  return static_cast<double>(n) / t;
}

// Memory traffic per second of an in-place axpy, y[i] += s * x[i], over
// two 64 MiB arrays: the access pattern of an optimizer step (read the
// parameter and the gradient, write the parameter back), counted the same
// way: 12 bytes per element.
// Built for the same instruction sets as the optimizers' loops.
__attribute__((target_clones("avx512f", "avx2", "default"))) void Axpy(
    float* __restrict y, const float* __restrict x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) y[i] += s * x[i];
}

double AxpyBytesPerSecond(double seconds) {
  const size_t n = size_t{16} << 20;
  std::vector<float> x(n, 1.0f), y(n, 0.0f);
  float scale = 1e-3f;
  const double t = SecondsPerCall(seconds, [&] {
    Axpy(y.data(), x.data(), n, scale);
    scale = y[n / 2] * 1e-30f + 1e-3f;  // Keep the loop from being elided.
    return true;
  });
  return 12.0 * static_cast<double>(n) / t;
}

struct SocketPair {
  int client = -1, server = -1;
  ~SocketPair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

// A TCP connection over loopback on a port the OS picks.
absl::Status Connect(SocketPair* pair) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return absl::InternalError("cannot listen on 127.0.0.1:0");
  }
  pair->client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(pair->client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    close(listener);
    return absl::InternalError("cannot connect over loopback");
  }
  pair->server = accept(listener, nullptr, nullptr);
  close(listener);
  if (pair->server < 0) return absl::InternalError("accept() failed");
  const int one = 1;
  setsockopt(pair->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(pair->server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return absl::OkStatus();
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One sender streams 1 MiB writes for about `seconds`; one receiver reads
// them. Bytes received per second.
absl::StatusOr<double> TcpBytesPerSecond(double seconds) {
  SocketPair pair;
  RETURN_IF_ERROR(Connect(&pair));
  const size_t block = size_t{1} << 20;
  std::atomic<int64_t> received{0};
  std::thread reader([&] {
    std::vector<char> buf(block);
    while (true) {
      const ssize_t r = read(pair.server, buf.data(), buf.size());
      if (r <= 0) break;
      received.fetch_add(r, std::memory_order_relaxed);
    }
  });
  std::vector<char> data(block, 7);
  const auto start = SteadyClock::now();
  while (Since(start) < seconds) {
    if (!WriteAll(pair.client, data.data(), data.size())) break;
  }
  shutdown(pair.client, SHUT_WR);
  reader.join();
  return static_cast<double>(received.load()) / Since(start);
}

// Round trips of `bytes` each way; p50 in seconds.
absl::StatusOr<double> TcpPingPongP50(int64_t bytes, double seconds) {
  SocketPair pair;
  RETURN_IF_ERROR(Connect(&pair));
  std::thread echo([&] {
    std::vector<char> buf(bytes);
    while (ReadAll(pair.server, buf.data(), buf.size()) &&
           WriteAll(pair.server, buf.data(), buf.size())) {
    }
  });
  std::vector<char> buf(bytes, 3);
  std::vector<double> rtt;
  const auto start = SteadyClock::now();
  while (Since(start) < seconds || rtt.size() < 10) {
    const auto t = SteadyClock::now();
    if (!WriteAll(pair.client, buf.data(), buf.size()) ||
        !ReadAll(pair.client, buf.data(), buf.size())) {
      break;
    }
    rtt.push_back(Since(t));
  }
  shutdown(pair.client, SHUT_WR);
  echo.join();
  return Percentile(rtt, 50);
}

// ---------------------------------------------------------------------------
// Transport through paramd.

enum class Mode { kPush, kPull, kPushPull };

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kPush:
      return "push";
    case Mode::kPull:
      return "pull";
    case Mode::kPushPull:
      return "push+pull";
  }
  return "?";
}

struct TransportOptions {
  int workers = 1;
  int servers = 1;
  int64_t chunk_bytes = 1 << 20;
  std::string policy = "async";
  double seconds = 0.6;
};

struct TransportResult {
  int64_t ops = 0;
  double bytes_per_second = 0;  // All workers together, both directions.
  double p50 = 0, p99 = 0;      // Seconds per operation.
};

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
  config.liveness.warn_after_seconds = 3600;
  config.chunk_bytes = o.chunk_bytes;
  return config;
}

class BenchCluster {
 public:
  static absl::StatusOr<std::unique_ptr<BenchCluster>> Start(
      const JobConfig& config) {
    auto cluster = std::unique_ptr<BenchCluster>(new BenchCluster());
    for (int k = 0; k < config.num_shards(); ++k) {
      auto server = ParameterServer::Create(config, k);
      if (!server.ok()) return server.status();
      ASSIGN_OR_RETURN(int port, (*server)->Start("127.0.0.1:0"));
      cluster->addresses_.push_back(absl::StrCat("127.0.0.1:", port));
      cluster->servers_.push_back(*std::move(server));
    }
    return cluster;
  }
  ~BenchCluster() {
    for (auto& s : servers_) s->Shutdown();
    for (auto& s : servers_) s->Wait();
  }
  const std::vector<std::string>& addresses() const { return addresses_; }

 private:
  BenchCluster() = default;
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::vector<std::string> addresses_;
};

constexpr size_t kMinOps = 5;

absl::StatusOr<TransportResult> RunTransport(int64_t bytes, Mode mode,
                                             const TransportOptions& o) {
  const JobConfig config = BenchJob(bytes, o);
  const ModelSpec spec = BuildModelSpec(config.model);
  ASSIGN_OR_RETURN(
      PartitionPlan plan,
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
  const FlatLayout layout(spec);
  ASSIGN_OR_RETURN(std::unique_ptr<BenchCluster> cluster,
                   BenchCluster::Start(config));

  struct WorkerRun {
    absl::Status status;
    std::vector<double> latencies;
  };
  std::vector<WorkerRun> runs(o.workers);
  absl::Barrier* ready = new absl::Barrier(o.workers + 1);
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < o.workers; ++rank) {
    threads.emplace_back([&, rank] {
      WorkerRun& run = runs[rank];
      GrpcParameterClient client(ClientSetup{&config, &plan, &layout, rank},
                                 cluster->addresses(), GrpcClientOptions());
      absl::StatusOr<uint64_t> clock = client.Register();
      std::vector<float> params(layout.total);
      // Gradients go where a trainer computes them: into the client's
      // buffer, which a push sends in place.
      const float* filled = nullptr;
      auto gradients = [&] {
        absl::Span<float> g = client.GradientBuffer();
        if (g.data() != filled) {
          std::fill(g.begin(), g.end(), 1e-3f);
          filled = g.data();
        }
        return g;
      };
      // One untimed operation of each kind warms connections and buffers.
      if (clock.ok()) {
        absl::StatusOr<uint64_t> v =
            client.PushPull(*clock, gradients(), 0, absl::MakeSpan(params));
        if (v.ok()) ++*clock;
        if (!v.ok()) clock = v.status();
      }
      if (ready->Block()) delete ready;
      if (!clock.ok()) {
        run.status = clock.status();
        return;
      }
      while (!go.load()) std::this_thread::yield();
      uint64_t c = *clock;
      while (!stop.load(std::memory_order_relaxed) ||
             run.latencies.size() < kMinOps) {
        const auto t = SteadyClock::now();
        absl::StatusOr<uint64_t> v;
        switch (mode) {
          case Mode::kPush:
            v = client.Push(c, gradients(), 0);
            break;
          case Mode::kPull:
            v = client.Pull(c, absl::MakeSpan(params));
            break;
          case Mode::kPushPull:
            v = client.PushPull(c, gradients(), 0, absl::MakeSpan(params));
            break;
        }
        if (!v.ok()) {
          run.status = v.status();
          return;
        }
        if (mode != Mode::kPull) ++c;
        run.latencies.push_back(Since(t));
      }
      client.Heartbeat(c, /*finished=*/true, absl::Seconds(5));
    });
  }
  if (ready->Block()) delete ready;
  const auto start = SteadyClock::now();
  go.store(true);
  // Each worker goes on after `seconds` until it did kMinOps operations.
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  const double elapsed = Since(start);
  TransportResult result;
  std::vector<double> all;
  for (const WorkerRun& r : runs) {
    if (!r.status.ok()) return r.status;
    result.ops += static_cast<int64_t>(r.latencies.size());
    all.insert(all.end(), r.latencies.begin(), r.latencies.end());
  }
  const double per_op = static_cast<double>(layout.total * kElementBytes) *
                        (mode == Mode::kPushPull ? 2 : 1);
  result.bytes_per_second = per_op * static_cast<double>(result.ops) / elapsed;
  result.p50 = Percentile(all, 50);
  result.p99 = Percentile(all, 99);
  return result;
}

// ---------------------------------------------------------------------------
// Optimizers.

struct OptimizerCase {
  const char* name;
  OptimizerConfig config;
};

std::vector<OptimizerCase> OptimizerCases() {
  auto make = [](const char* type, double momentum, bool nesterov) {
    OptimizerConfig c;
    c.type = type;
    c.learning_rate = 1e-3;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.eps = std::string(type) == "adagrad" ? 1e-10 : 1e-8;
    return c;
  };
  return {
      {"sgd", make("sgd", 0, false)},
      {"sgd momentum", make("sgd", 0.9, false)},
      {"sgd nesterov", make("sgd", 0.9, true)},
      {"adam", make("adam", 0, false)},
      {"adamw", make("adamw", 0, false)},
      {"rmsprop", make("rmsprop", 0, false)},
      {"adagrad", make("adagrad", 0, false)},
  };
}

// Bytes an optimizer step must move per parameter: read and write the
// parameter and each slot, read the gradient.
int64_t BytesTouchedPerParam(int slots) {
  return kElementBytes * (2 + 1 + 2 * slots);
}

int Main(int argc, char** argv) {
  SetUpProcess();
  auto flags =
      ParseFlags(argc, argv,
                 {"clusters", "sizes", "modes", "seconds", "chunk_bytes",
                  "policy", "optimizer_sizes", "log_level"},
                 {"skip_transport", "skip_optimizers"});
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "paramd-bench: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  };
  if (!flags.ok()) return fail(flags.status());
  if (auto s = InitLogging("paramd-bench", flags->Get("log_level", "warn"));
      !s.ok()) {
    return fail(s);
  }
  TransportOptions topt;
  auto chunk = flags->GetInt("chunk_bytes", 1 << 20);
  if (!chunk.ok()) return fail(chunk.status());
  if (*chunk < 4096) {
    return fail(absl::InvalidArgumentError("--chunk_bytes: must be >= 4096"));
  }
  topt.chunk_bytes = *chunk;
  // "NxM": N workers, M servers.
  std::vector<std::pair<int, int>> clusters;
  for (absl::string_view c : absl::StrSplit(flags->Get("clusters", "1x1,2x2"),
                                            ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> nm = absl::StrSplit(c, 'x');
    int n = 0, m = 0;
    if (nm.size() != 2 || !absl::SimpleAtoi(nm[0], &n) ||
        !absl::SimpleAtoi(nm[1], &m) || n < 1 || m < 1 || n > 64 || m > 64) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("--clusters: '", std::string(c),
                       "' is not WORKERSxSERVERS (e.g. 2x2, each 1-64)")));
    }
    clusters.emplace_back(n, m);
  }
  topt.policy = flags->Get("policy", "async");
  if (topt.policy != "async" && topt.policy != "sync") {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--policy: '", topt.policy, "' is not async or sync")));
  }
  if (!absl::SimpleAtod(flags->Get("seconds", "0.6"), &topt.seconds) ||
      topt.seconds <= 0) {
    return fail(absl::InvalidArgumentError("--seconds: not a positive number"));
  }
  auto sizes = ParseSizes("sizes", flags->Get("sizes", "4K,64K,1M,16M,64M"));
  if (!sizes.ok()) return fail(sizes.status());
  auto opt_sizes = ParseSizes("optimizer_sizes",
                              flags->Get("optimizer_sizes", "1M,16M,64M"));
  if (!opt_sizes.ok()) return fail(opt_sizes.status());
  std::vector<Mode> modes;
  for (absl::string_view m :
       absl::StrSplit(flags->Get("modes", "push,pull,push+pull"), ',',
                      absl::SkipEmpty())) {
    if (m == "push")
      modes.push_back(Mode::kPush);
    else if (m == "pull")
      modes.push_back(Mode::kPull);
    else if (m == "push+pull")
      modes.push_back(Mode::kPushPull);
    else {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--modes: '", std::string(m), "' is not push, pull or push+pull")));
    }
  }
  const auto bench_start = SteadyClock::now();

  // Ceilings.
  const double memcpy_bps = MemcpyBytesPerSecond(0.5);
  const double axpy_bps = AxpyBytesPerSecond(0.5);
  absl::StatusOr<double> tcp_bps = TcpBytesPerSecond(1.0);
  if (!tcp_bps.ok()) return fail(tcp_bps.status());
  absl::StatusOr<double> tcp_rtt = TcpPingPongP50(4096, 0.3);
  if (!tcp_rtt.ok()) return fail(tcp_rtt.status());
  std::printf("Ceilings\n");
  std::printf(
      "  memcpy 64 MiB                 %7.2f GB/s copied (%.2f GB/s of "
      "memory traffic)\n",
      memcpy_bps / 1e9, 2 * memcpy_bps / 1e9);
  std::printf("  axpy in place 2 x 64 MiB       %6.2f GB/s of memory traffic\n",
              axpy_bps / 1e9);
  std::printf("  raw TCP loopback, 1 MiB writes %6.2f GB/s\n", *tcp_bps / 1e9);
  std::printf("  raw TCP 4 KiB ping-pong p50    %6.1f us\n\n", *tcp_rtt * 1e6);

  double goal_pushpull_fraction = -1, goal_4k_p50 = -1;
  for (const auto& [workers, servers] : clusters) {
    if (flags->Has("skip_transport")) break;
    topt.workers = workers;
    topt.servers = servers;
    std::printf(
        "Transport: %d worker(s) x %d server(s), gRPC over loopback, "
        "policy %s, chunk_bytes %s\n",
        topt.workers, topt.servers, topt.policy.c_str(),
        SizeName(topt.chunk_bytes).c_str());
    std::printf("  %-10s %8s %7s %9s %8s %10s %10s\n", "mode", "size", "ops",
                "GB/s", "of TCP", "p50 ms", "p99 ms");
    for (int64_t size : *sizes) {
      for (Mode mode : modes) {
        absl::StatusOr<TransportResult> r = RunTransport(size, mode, topt);
        if (!r.ok()) {
          return fail(
              absl::Status(r.status().code(),
                           absl::StrCat(ModeName(mode), " ", SizeName(size),
                                        ": ", r.status().message())));
        }
        const double of_tcp = r->bytes_per_second / *tcp_bps;
        std::printf("  %-10s %8s %7lld %9.3f %7.1f%% %10.3f %10.3f\n",
                    ModeName(mode), SizeName(size).c_str(),
                    static_cast<long long>(r->ops), r->bytes_per_second / 1e9,
                    100 * of_tcp, r->p50 * 1e3, r->p99 * 1e3);
        std::fflush(stdout);
        if (mode == Mode::kPushPull && workers == 1 && servers == 1) {
          if (size == (16 << 20)) goal_pushpull_fraction = of_tcp;
          if (size == 4096) goal_4k_p50 = r->p50;
        }
      }
    }
    std::printf(
        "  (GB/s counts the bytes of every worker; push+pull moves "
        "the payload both ways)\n\n");
  }

  std::vector<std::pair<std::string, double>> goal_optimizers;
  if (!flags->Has("skip_optimizers")) {
    // The higher of the two measured memory-traffic rates.
    const double bandwidth = std::max(2 * memcpy_bps, axpy_bps);
    std::printf(
        "Optimizer apply, one thread (bound: bytes touched / %.2f GB/s "
        "of memory traffic, the faster of memcpy and axpy)\n",
        bandwidth / 1e9);
    std::printf("  %-14s %6s %8s %10s %10s %9s %8s\n", "optimizer", "params",
                "B/param", "ms/step", "Mparam/s", "GB/s", "of bound");
    int64_t most = 0;
    for (int64_t n : *opt_sizes) most = std::max(most, n);
    std::vector<float> params(most, 0.01f), grad(most, 1e-3f);
    std::vector<std::vector<float>> slots;
    for (const OptimizerCase& c : OptimizerCases()) {
      absl::StatusOr<std::unique_ptr<Optimizer>> opt = MakeOptimizer(c.config);
      if (!opt.ok()) return fail(opt.status());
      for (int64_t n : *opt_sizes) {
        slots.assign((*opt)->num_slots(), std::vector<float>(n, 0.0f));
        int64_t step = 0;
        const double t = SecondsPerCall(0.4, [&] {
          (*opt)->Apply(absl::MakeSpan(params.data(), n),
                        absl::MakeConstSpan(grad.data(), n), 1.0f,
                        absl::MakeSpan(slots), ++step);
          return true;
        });
        const int64_t per = BytesTouchedPerParam((*opt)->num_slots());
        const double gbps = static_cast<double>(per * n) / t;
        const double of_bound = gbps / bandwidth;
        std::printf("  %-14s %6s %8lld %10.2f %10.1f %9.2f %7.1f%%\n", c.name,
                    SizeName(n).c_str(), static_cast<long long>(per), t * 1e3,
                    static_cast<double>(n) / t / 1e6, gbps / 1e9,
                    100 * of_bound);
        std::fflush(stdout);
        if (n == (16 << 20)) goal_optimizers.emplace_back(c.name, of_bound);
      }
    }
    std::printf("\n");
  }

  std::printf("Goals\n");
  auto line = [](const std::string& what, bool met, const std::string& got) {
    std::printf("  %-48s %-6s %s\n", what.c_str(), met ? "met" : "MISSED",
                got.c_str());
  };
  if (goal_pushpull_fraction >= 0) {
    line("push+pull 16M (1x1) >= 50% of raw TCP", goal_pushpull_fraction >= 0.5,
         absl::StrCat(static_cast<int>(goal_pushpull_fraction * 1000) / 10.0,
                      "%"));
  } else {
    std::printf("  push+pull 16M (1x1): not run with these settings\n");
  }
  if (goal_4k_p50 >= 0) {
    line("push+pull 4K (1x1) p50 <= 250 us", goal_4k_p50 <= 250e-6,
         absl::StrCat(static_cast<int>(goal_4k_p50 * 1e7) / 10.0, " us"));
  } else {
    std::printf("  push+pull 4K (1x1): not run with these settings\n");
  }
  for (const auto& [name, f] : goal_optimizers) {
    line(absl::StrCat(name, " 16M >= 50% of its bandwidth bound"), f >= 0.5,
         absl::StrCat(static_cast<int>(f * 1000) / 10.0, "%"));
  }
  std::printf("\nparamd-bench took %.1f s\n", Since(bench_start));
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
