// rows_bench: embedding tables at scale. Starts real paramd-server
// processes and worker processes (this binary, --role worker) that train
// an embedding_concat model — 26 categorical fields of a synthetic click
// log (tools/rows/click_log.h), rows of a 2^32-row table concatenated into an
// MLP with a logistic (2-way softmax) output — and prints rows pulled and
// pushed per second, bytes per step, each worker's peak RSS, the servers'
// rows, bytes per row against the ideal dim × 4 × (1 + slots), and the
// final loss against the teacher's.
//
//   bazel run -c opt //tools:rows_bench -- [--samples N] [--batch B]
//       [--workers W] [--servers S] [--dim D] [--hidden H (0: logistic)]
//       [--optimizer sgd|adagrad|adam] [--lr X] [--policy sync|async]
//       [--zipf S] [--seed N]
//   bazel run -c opt //tools:rows_bench -- --index_bench N   (the row
//       index: flat_hash_map against unordered_map)
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/binaries.h"
#include "common/base/flags.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/rpc/credentials.h"
#include "tools/bench/proc_status.h"
#include "tools/ctl/status_client.h"
#include "tools/ctl/supervisor.h"
#include "tools/rows/click_log.h"
#include "tools/rows/rows_bench_worker.h"

namespace paramd {
namespace {

struct BenchOptions {
  int64_t samples = 4000000;
  int batch = 1024;
  int workers = 2;
  int servers = 2;
  int dim = 16;
  int hidden = 64;
  std::string optimizer = "adagrad";
  std::string lr = "0.05";
  std::string policy = "sync";
  ClickLogOptions log;
};

std::string JobYaml(const BenchOptions& o) {
  std::vector<std::string> servers(o.servers, "\"127.0.0.1:0\"");
  const int width = o.log.fields * o.dim;
  const std::string layers =
      o.hidden > 0 ? absl::StrCat("[", width, ", ", o.hidden, ", 2]")
                   : absl::StrCat("[", width, ", 2]");
  return absl::StrCat(
      "job:\n  id: click-log\n  seed: ", o.log.seed, "\ncluster:\n  servers: [",
      absl::StrJoin(servers, ", "), "]\n  workers: ", o.workers,
      "\nmodel:\n  type: embedding_concat\n  layers: ", layers,
      "\n  embeddings:\n    - name: clicks\n      rows: 4294967296\n"
      "      dim: ",
      o.dim,
      "\n      init: normal\n      init_scale: 0.01\n"
      "      optimizer: {type: ",
      o.optimizer, ", learning_rate: ", o.lr,
      "}\n  features:\n    fields: ", o.log.fields,
      "\ntraining:\n  epochs: 1\n  batch_size: ", o.batch,
      "\noptimizer:\n  type: adam\n  learning_rate: 0.001\n"
      "policy:\n  type: ",
      o.policy, "\nliveness:\n  lease_seconds: 60\n  heartbeat_seconds: 1\n");
}

absl::StatusOr<BenchOptions> ParseOptions(const ParsedFlags& f) {
  BenchOptions o;
  ASSIGN_OR_RETURN(o.batch, f.GetInt("batch", o.batch));
  ASSIGN_OR_RETURN(o.workers, f.GetInt("workers", o.workers));
  ASSIGN_OR_RETURN(o.servers, f.GetInt("servers", o.servers));
  ASSIGN_OR_RETURN(o.dim, f.GetInt("dim", o.dim));
  ASSIGN_OR_RETURN(o.hidden, f.GetInt("hidden", o.hidden));
  ASSIGN_OR_RETURN(o.log.fields, f.GetInt("fields", o.log.fields));
  o.samples = std::stoll(f.Get("samples", std::to_string(o.samples)));
  o.log.seed = std::stoull(f.Get("seed", "1"));
  o.log.zipf = std::stod(f.Get("zipf", "1.05"));
  o.optimizer = f.Get("optimizer", o.optimizer);
  o.lr = f.Get("lr", o.lr);
  o.policy = f.Get("policy", o.policy);
  if (o.batch < 1 || o.workers < 1 || o.servers < 1 || o.samples < 1 ||
      !(o.log.zipf > 1)) {
    return absl::InvalidArgumentError(
        "--batch, --workers, --servers and --samples must be >= 1, --zipf "
        "> 1");
  }
  return o;
}

// Waits (polling the children) until every port file holds a port.
absl::StatusOr<std::vector<std::string>> AwaitPorts(
    Supervisor& supervisor, const std::vector<std::string>& files) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::vector<std::string> addresses(files.size());
  while (absl::Now() < deadline) {
    bool all = true;
    for (size_t i = 0; i < files.size(); ++i) {
      std::ifstream in(files[i]);
      std::string port;
      if (in >> port && !port.empty()) {
        addresses[i] = "127.0.0.1:" + port;
      } else {
        all = false;
      }
    }
    if (all) return addresses;
    for (int exited : supervisor.Poll(absl::Milliseconds(50))) {
      return absl::InternalError(absl::StrCat(
          supervisor.child(exited).name, " ",
          Supervisor::DescribeExit(supervisor.child(exited).wait_status)));
    }
  }
  return absl::DeadlineExceededError("servers did not start within 60 s");
}

// The servers' side after a run: their tables' rows and bytes, their
// processes' memory.
struct ServerTotals {
  uint64_t rows = 0;
  uint64_t table_bytes = 0;
  int64_t rss = 0;
};

// The workers' results summed (counts) or averaged (times and losses).
struct WorkerTotals {
  double seconds = 0, pull = 0, step = 0, first = 0, last = 0, teacher = 0;
  int64_t steps = 0, pulled = 0, ids = 0, bytes_in = 0, bytes_out = 0;
  int64_t peak = 0;
};

// Spawns one bench worker process per rank against `servers`.
std::vector<int> SpawnWorkers(Supervisor& supervisor, const std::string& self,
                              const std::string& job,
                              const std::string& servers,
                              const BenchOptions& o) {
  std::vector<int> workers;
  for (int r = 0; r < o.workers; ++r) {
    const std::vector<std::string> argv = {self,
                                           "--role",
                                           "worker",
                                           "--rank",
                                           std::to_string(r),
                                           "--server_list",
                                           servers,
                                           "--job",
                                           job,
                                           "--samples",
                                           std::to_string(o.samples),
                                           "--batch",
                                           std::to_string(o.batch),
                                           "--zipf",
                                           absl::StrCat(o.log.zipf),
                                           "--seed",
                                           std::to_string(o.log.seed),
                                           "--fields",
                                           std::to_string(o.log.fields)};
    workers.push_back(*supervisor.Spawn(absl::StrCat("worker ", r), argv));
  }
  return workers;
}

// Waits for every worker and reads its result line.
absl::StatusOr<std::vector<RowsWorkerResult>> AwaitWorkers(
    Supervisor& supervisor, const std::vector<int>& workers) {
  int running = static_cast<int>(workers.size());
  while (running > 0) {
    for (int i : supervisor.Poll(absl::Seconds(1))) {
      for (int w : workers) running -= w == i ? 1 : 0;
    }
  }
  std::vector<RowsWorkerResult> results;
  for (int w : workers) {
    const ChildInfo& c = supervisor.child(w);
    absl::StatusOr<RowsWorkerResult> r =
        c.wait_status == 0
            ? RowsWorkerResult::FromJson(c.last_line)
            : absl::InternalError(Supervisor::DescribeExit(c.wait_status));
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat(c.name, ": ", r.status().message()));
    }
    results.push_back(*r);
  }
  return results;
}

ServerTotals QueryServers(const Supervisor& supervisor,
                          const std::vector<std::string>& addresses) {
  ServerTotals t;
  for (size_t k = 0; k < addresses.size(); ++k) {
    absl::StatusOr<proto::ShardStatus> st =
        QueryShardStatus(addresses[k], JobSecurity(), absl::Seconds(10));
    if (st.ok() && st->tables_size() == 1) {
      t.rows += st->tables(0).rows();
      t.table_bytes += st->tables(0).bytes();
    }
    t.rss += RssBytes(supervisor.child(static_cast<int>(k)).pid);
  }
  return t;
}

WorkerTotals SumWorkers(const std::vector<RowsWorkerResult>& results) {
  WorkerTotals t;
  const double n = static_cast<double>(results.size());
  for (const RowsWorkerResult& r : results) {
    t.seconds = std::max(t.seconds, r.seconds);
    t.pull += r.pull_seconds / n;
    t.step += r.step_seconds / n;
    t.steps += r.steps;
    t.pulled += r.rows_pulled;
    t.ids += r.ids;
    t.bytes_in += r.bytes_pulled;
    t.bytes_out += r.bytes_pushed;
    t.peak = std::max(t.peak, r.peak_rss_bytes);
    t.first += r.first_loss / n;
    t.last += r.final_loss / n;
    t.teacher += r.teacher_loss / n;
  }
  return t;
}

void PrintReport(const BenchOptions& o, const WorkerTotals& w,
                 const ServerTotals& s) {
  const int slots = o.optimizer == "adam"      ? 2
                    : o.optimizer == "adagrad" ? 1
                                               : 0;
  const double ideal = o.dim * 4.0 * (1 + slots);
  const double steps = static_cast<double>(w.steps);
  const double per_worker = steps / o.workers;
  std::printf("steps: %lld (%lld per worker) in %.1f s; %.0f samples/s\n",
              static_cast<long long>(w.steps),
              static_cast<long long>(w.steps / o.workers), w.seconds,
              steps * o.batch / w.seconds);
  std::printf(
      "rows pulled: %.0f/s (%.0f distinct per step of %lld ids); "
      "rows pushed: the same\n",
      w.pulled / w.seconds, w.pulled / steps,
      static_cast<long long>(w.ids / w.steps));
  std::printf("bytes per worker step: %.0f pulled, %.0f pushed (rows only)\n",
              w.bytes_in / steps, w.bytes_out / steps);
  std::printf(
      "per step: %.1f ms in PullRows, %.1f ms in PushPull (worker "
      "mean)\n",
      1e3 * w.pull / per_worker, 1e3 * w.step / per_worker);
  std::printf("worker peak RSS: %.1f MB (largest of %d)\n", w.peak / 1e6,
              o.workers);
  std::printf(
      "servers: %llu distinct rows held; table memory %.1f MB = %.1f "
      "bytes/row (ideal dim x 4 x (1 + %d slots) = %.0f); process "
      "RSS %.1f MB = %.1f bytes/row\n",
      static_cast<unsigned long long>(s.rows), s.table_bytes / 1e6,
      s.rows > 0 ? static_cast<double>(s.table_bytes) / s.rows : 0.0, slots,
      ideal, s.rss / 1e6,
      s.rows > 0 ? static_cast<double>(s.rss) / s.rows : 0.0);
  std::printf(
      "log loss: first tenth %.4f, last tenth %.4f; the teacher's "
      "on the last tenth %.4f (gap %.4f)\n",
      w.first, w.last, w.teacher, w.last - w.teacher);
}

int Driver(const std::string& self, const BenchOptions& o) {
  char dir_template[] = "/tmp/paramd-rows-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string job = absl::StrCat(dir, "/click_log.yaml");
  std::ofstream(job) << JobYaml(o);
  absl::StatusOr<JobConfig> config = LoadJobConfig(job);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  Supervisor supervisor;
  std::vector<std::string> port_files;
  const std::string server_binary = FindBinary("paramd-server", "server");
  for (int k = 0; k < o.servers; ++k) {
    port_files.push_back(absl::StrCat(dir, "/port", k));
    (void)supervisor.Spawn(
        absl::StrCat("server ", k),
        {server_binary, "--job", job, "--shard", std::to_string(k), "--listen",
         "127.0.0.1:0", "--port_file", port_files.back(), "--log_level",
         "warning", "--launch", "rows-bench"});
  }
  absl::StatusOr<std::vector<std::string>> addresses =
      AwaitPorts(supervisor, port_files);
  if (!addresses.ok()) {
    std::fprintf(stderr, "%s\n", addresses.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "rows_bench: %lld samples of %d fields (Zipf %.2f over 2^32), batch "
      "%d, %d worker(s) x %d server(s), dim %d, %s lr %s, %s\n",
      static_cast<long long>(o.samples), o.log.fields, o.log.zipf, o.batch,
      o.workers, o.servers, o.dim, o.optimizer.c_str(), o.lr.c_str(),
      o.policy.c_str());
  std::fflush(stdout);
  absl::StatusOr<std::vector<RowsWorkerResult>> results = AwaitWorkers(
      supervisor,
      SpawnWorkers(supervisor, self, job, absl::StrJoin(*addresses, ","), o));
  if (!results.ok()) {
    std::fprintf(stderr, "%s\n", results.status().ToString().c_str());
    supervisor.StopAll(absl::Seconds(5));
    return 1;
  }
  const ServerTotals servers = QueryServers(supervisor, *addresses);
  supervisor.StopAll(absl::Seconds(10));
  PrintReport(o, SumWorkers(*results), servers);
  return 0;
}

// The row index's choice: absl::flat_hash_map against std::unordered_map,
// inserting `n` random ids then finding each, with the heap bytes each
// holds per entry (glibc's mallinfo2).
size_t HeapBytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // Small blocks and mmap'd ones.
}

template <typename Map>
void IndexRow(const char* name, const std::vector<uint64_t>& ids,
              const std::vector<uint64_t>& lookups) {
  const size_t before = HeapBytes();
  const absl::Time start = absl::Now();
  auto* map = new Map();
  for (size_t i = 0; i < ids.size(); ++i) {
    map->emplace(ids[i], static_cast<uint32_t>(i));
  }
  const absl::Time inserted = absl::Now();
  uint64_t sum = 0;
  for (uint64_t id : lookups) sum += map->find(id)->second;
  const absl::Time found = absl::Now();
  const size_t bytes = HeapBytes() - before;
  std::printf("%-28s %10.1f %10.1f %12.1f   (checksum %llu)\n", name,
              absl::ToDoubleNanoseconds(inserted - start) / ids.size(),
              absl::ToDoubleNanoseconds(found - inserted) / ids.size(),
              static_cast<double>(bytes) / ids.size(),
              static_cast<unsigned long long>(sum));
  delete map;
}

int IndexBench(int64_t n) {
  std::vector<uint64_t> ids(n);
  uint64_t x = 1;
  for (uint64_t& id : ids) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    id = x >> 24;
  }
  // Looked up in another random order than inserted.
  std::vector<uint64_t> lookups = ids;
  for (size_t i = lookups.size(); i > 1; --i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(lookups[i - 1], lookups[(x >> 33) % i]);
  }
  std::printf("row index, %lld random ids:\n%-28s %10s %10s %12s\n",
              static_cast<long long>(n), "map", "insert ns", "find ns",
              "bytes/entry");
  IndexRow<absl::flat_hash_map<uint64_t, uint32_t>>("absl::flat_hash_map", ids,
                                                    lookups);
  IndexRow<std::unordered_map<uint64_t, uint32_t>>("std::unordered_map", ids,
                                                   lookups);
  return 0;
}

int Worker(const ParsedFlags& f, const BenchOptions& o) {
  absl::StatusOr<JobConfig> config = LoadJobConfig(f.Get("job", ""));
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  RowsWorkerOptions w;
  w.rank = std::stoi(f.Get("rank", "0"));
  w.samples = o.samples;
  w.batch = o.batch;
  absl::StatusOr<RowsWorkerResult> r = RunRowsWorker(
      *config, absl::StrSplit(f.Get("server_list", ""), ','), o.log, w);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", r->ToJson().c_str());
  return 0;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv,
                 {"samples", "batch", "workers", "servers", "dim", "hidden",
                  "fields", "optimizer", "lr", "policy", "zipf", "seed", "role",
                  "rank", "server_list", "job", "index_bench"},
                 {});
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", flags.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<BenchOptions> o = ParseOptions(*flags);
  if (!o.ok()) {
    std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
    return 2;
  }
  if (flags->Get("role", "driver") == "worker") return Worker(*flags, *o);
  if (flags->Has("index_bench")) {
    return IndexBench(std::stoll(flags->Get("index_bench", "10000000")));
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  return Driver(self, *o);
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
