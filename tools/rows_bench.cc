// rows_bench: embedding tables at scale, trained by paramd-worker itself.
// Writes a synthetic click log (tools/rows/click_log.h: 26 Zipf categorical
// fields over 2^32 values, labels from a hidden logistic teacher) as
// click-log files (data.format: clicks), starts real paramd-server and
// paramd-worker processes on a job whose model is an embedding_concat
// front — each field's row of a 2^32-row table, concatenated — into an MLP
// with a 2-way softmax, and prints samples/s, rows pulled and pushed per
// second and per step, each worker's peak RSS, the servers' rows and bytes
// per row against the ideal dim × 4 × (1 + slots), and the epoch's loss
// (progressive validation: each batch is scored before it is trained on)
// and test accuracy against the teacher's.
//
//   bazel run -c opt //tools:rows_bench -- [--samples N] [--batch B]
//       [--workers W] [--servers S] [--dim D] [--hidden H (0: logistic)]
//       [--optimizer sgd|adagrad|adam] [--lr X] [--policy sync|async]
//       [--table_policy async] (the table's own policy beside the job's)
//       [--dense D] (D count features per sample before the fields, as
//       the Criteo layout's 13, read by the embedding_concat layer)
//       [--bottom W1,W2,...] (with --dense: a bottom MLP of bottom_dense
//       layers of those widths on them, DLRM's)
//       [--zipf S] [--seed N] [--fields F] [--keep_dir] [--export DIR]
//       [--admission "min_count: 2"] [--eviction "capacity_rows: N, ..."]
//       [--storage BYTES] (the table's storage: at most BYTES of rows in
//       memory on each server, the rest on disk in the run's folder)
//       [--checkpoint_every N [--full_every K]] (checkpoints every N
//       versions, every K-th full) [--kill_server_after S] (the last
//       server SIGKILLed S seconds into training and started again: it
//       restores from its checkpoint)
//       (the table's admission and eviction, as the job file's mappings;
//       --export: after training, paramctl export's code writes the model
//       into DIR, then a ServedModel loads it and looks rows up, timed)
//   bazel run -c opt //tools:rows_bench -- --index_bench N   (the row
//       index: flat_hash_map against unordered_map)
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/binaries.h"
#include "common/base/flags.h"
#include "common/base/process_setup.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/rpc/credentials.h"
#include "server/checkpoint/file_system.h"
#include "tools/bench/proc_status.h"
#include "tools/bench/server_processes.h"
#include "tools/ctl/export_job.h"
#include "tools/ctl/rpc/status_client.h"
#include "tools/ctl/supervisor.h"
#include "tools/rows/click_log.h"
#include "tools/rows/export_serve.h"
#include "tools/rows/index_bench.h"
#include "tools/serve/served_model.h"

namespace paramd {
namespace {

struct BenchOptions {
  int64_t samples = 2000000;
  int batch = 1024;
  int workers = 2;
  int servers = 2;
  int dim = 16;
  int hidden = 64;
  std::string optimizer = "adagrad";
  std::string lr = "0.05";
  std::string policy = "sync";
  std::string table_policy;  // "": the job's.
  std::vector<int> bottom;   // bottom_dense widths.
  bool keep_dir = false;
  std::string admission, eviction;  // Flow mappings' insides; "": none.
  std::string export_dir;           // --export; "": none.
  uint64_t storage_bytes = 0;       // --storage; 0: rows in memory.
  int checkpoint_every = 0, full_every = 0;
  int kill_after = 0;  // --kill_server_after SECONDS; 0: none.
  ClickLogOptions log;
};

// The test samples: as many as a tenth of the training ones, drawn far
// from them (the log is a pure function of the index).
constexpr uint64_t kTestFirst = uint64_t{1} << 40;

std::string JobYaml(const BenchOptions& o, const std::string& dir,
                    const std::string& train, const std::string& test) {
  std::vector<std::string> servers(o.servers, "\"127.0.0.1:0\"");
  std::string bottom;
  for (int width : o.bottom) {
    absl::StrAppend(&bottom, "    - bottom_dense: {out: ", width, "}\n");
  }
  const std::string head =
      o.hidden > 0 ? absl::StrCat("    - dense: {out: ", o.hidden,
                                  "}\n    - relu\n    - dense: {out: 2}\n")
                   : "    - dense: {out: 2}\n";
  return absl::StrCat(
      "job:\n  id: click-log\n  seed: ", o.log.seed, "\ncluster:\n  servers: [",
      absl::StrJoin(servers, ", "), "]\n  workers: ", o.workers,
      "\nmodel:\n  layers:\n    - embedding_concat: {table: clicks, fields: ",
      o.log.fields, ", dense: ", o.log.dense, "}\n", bottom, head,
      "  embeddings:\n    - name: clicks\n      rows: 4294967296\n"
      "      dim: ",
      o.dim,
      "\n      init: normal\n      init_scale: 0.01\n"
      "      optimizer: {type: ",
      o.optimizer, ", learning_rate: ", o.lr, "}\n",
      o.admission.empty()
          ? ""
          : absl::StrCat("      admission: {", o.admission, "}\n"),
      o.eviction.empty() ? ""
                         : absl::StrCat("      eviction: {", o.eviction, "}\n"),
      o.table_policy.empty()
          ? ""
          : absl::StrCat("      policy: ", o.table_policy, "\n"),
      o.storage_bytes == 0
          ? ""
          : absl::StrCat("      storage: {memory_bytes: ", o.storage_bytes,
                         ", dir: ", dir, "/rows}\n"),
      o.checkpoint_every == 0
          ? ""
          : absl::StrCat("checkpoint:\n  dir: ", dir,
                         "/checkpoints\n  every_steps: ", o.checkpoint_every,
                         "\n  full_every: ", std::max(o.full_every, 1), "\n"),
      "data:\n  format: clicks\n  train_file: ", train, "\n  test_file: ", test,
      "\ntraining:\n  epochs: 1\n  batch_size: ", o.batch,
      "\n  shuffle: false\noptimizer:\n  type: adam\n  learning_rate: 0.001\n"
      "policy:\n  type: ",
      o.policy,
      "\nliveness:\n  lease_seconds: 60\n  heartbeat_seconds: 1\n"
      "worker:\n  threads: 1\n");
}

absl::StatusOr<BenchOptions> ParseOptions(const ParsedFlags& f) {
  BenchOptions o;
  ASSIGN_OR_RETURN(o.batch, f.GetInt("batch", o.batch));
  ASSIGN_OR_RETURN(o.workers, f.GetInt("workers", o.workers));
  ASSIGN_OR_RETURN(o.servers, f.GetInt("servers", o.servers));
  ASSIGN_OR_RETURN(o.dim, f.GetInt("dim", o.dim));
  ASSIGN_OR_RETURN(o.hidden, f.GetInt("hidden", o.hidden));
  ASSIGN_OR_RETURN(o.log.fields, f.GetInt("fields", o.log.fields));
  ASSIGN_OR_RETURN(o.log.dense, f.GetInt("dense", o.log.dense));
  for (absl::string_view w :
       absl::StrSplit(f.Get("bottom", ""), ',', absl::SkipEmpty())) {
    int width = 0;
    if (!absl::SimpleAtoi(w, &width)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--bottom: '", w, "' is not a width"));
    }
    o.bottom.push_back(width);
  }
  o.samples = std::stoll(f.Get("samples", std::to_string(o.samples)));
  o.log.seed = std::stoull(f.Get("seed", "1"));
  o.log.zipf = std::stod(f.Get("zipf", "1.05"));
  o.optimizer = f.Get("optimizer", o.optimizer);
  o.lr = f.Get("lr", o.lr);
  o.policy = f.Get("policy", o.policy);
  o.table_policy = f.Get("table_policy", "");
  o.keep_dir = f.Has("keep_dir");
  o.admission = f.Get("admission", "");
  o.eviction = f.Get("eviction", "");
  o.export_dir = f.Get("export", "");
  o.storage_bytes = std::stoull(f.Get("storage", "0"));
  ASSIGN_OR_RETURN(o.checkpoint_every, f.GetInt("checkpoint_every", 0));
  ASSIGN_OR_RETURN(o.full_every, f.GetInt("full_every", 0));
  ASSIGN_OR_RETURN(o.kill_after, f.GetInt("kill_server_after", 0));
  if (o.batch < 1 || o.workers < 1 || o.servers < 1 ||
      o.samples < int64_t{o.batch} * o.workers || !(o.log.zipf > 1)) {
    return absl::InvalidArgumentError(
        "--batch, --workers and --servers must be >= 1, --samples at least a "
        "batch per worker, --zipf > 1");
  }
  return o;
}

// What the servers hold and served once the workers are done.
struct ServerTotals {
  uint64_t rows = 0, table_bytes = 0, rows_pulled = 0, rows_pushed = 0;
  uint64_t rows_not_admitted = 0, rows_evicted = 0;
  uint64_t rows_on_disk = 0, disk_bytes = 0, moved_out = 0, read_back = 0;
  int64_t rss = 0, peak_rss = 0;  // Summed; the largest server's peak.
  bool have_epoch = false;
  proto::EpochMetrics epoch;
};

ServerTotals QueryServers(ServerProcesses& servers) {
  ServerTotals t;
  for (size_t k = 0; k < servers.addresses().size(); ++k) {
    absl::StatusOr<proto::ShardStatus> st = QueryShardStatus(
        servers.addresses()[k], JobSecurity(), absl::Seconds(10));
    if (!st.ok()) continue;
    if (st->tables_size() == 1) {
      t.rows += st->tables(0).rows();
      t.table_bytes += st->tables(0).bytes();
      t.rows_pulled += st->tables(0).rows_pulled();
      t.rows_pushed += st->tables(0).rows_pushed();
      t.rows_not_admitted += st->tables(0).rows_not_admitted();
      t.rows_evicted += st->tables(0).rows_evicted();
      t.rows_on_disk += st->tables(0).rows_on_disk();
      t.disk_bytes += st->tables(0).disk_bytes();
      t.moved_out += st->tables(0).rows_moved_out();
      t.read_back += st->tables(0).rows_read_back();
    }
    if (k == 0 && st->epochs_size() > 0) {
      t.have_epoch = true;
      t.epoch = st->epochs(st->epochs_size() - 1);
    }
    t.rss += RssBytes(servers.pid(static_cast<int>(k)));
    t.peak_rss =
        std::max(t.peak_rss, PeakRssBytes(servers.pid(static_cast<int>(k))));
    t.peak_rss = std::max(t.peak_rss, servers.killed_peak_rss());
  }
  return t;
}

void PrintReport(const BenchOptions& o, const ClickLogFigures& train,
                 const ClickLogFigures& test, double seconds,
                 int64_t worker_peak, const ServerTotals& s) {
  const int slots = o.optimizer == "adam"      ? 2
                    : o.optimizer == "adagrad" ? 1
                                               : 0;
  const double ideal = o.dim * 4.0 * (1 + slots);
  const int64_t per_worker = o.samples / o.workers;
  const int64_t steps =
      o.workers * ((per_worker + o.batch - 1) / o.batch);  // Every rank's.
  const double samples_per_s =
      s.have_epoch ? s.epoch.samples_per_second() : o.samples / seconds;
  std::printf(
      "training: %lld samples in %lld worker steps, %.1f s wall (paramd-worker "
      "processes, start-up and the file's check included); %.0f samples/s "
      "(the epoch's, from its slowest worker)\n",
      static_cast<long long>(o.samples), static_cast<long long>(steps), seconds,
      samples_per_s);
  const double step_s = o.batch / samples_per_s * o.workers;
  std::printf(
      "rows pulled: %.0f per step (distinct, of %d ids; the test pass's "
      "pulls included), %.0f/s; rows pushed: %.0f per step\n",
      static_cast<double>(s.rows_pulled) / steps, o.batch * o.log.fields,
      s.rows_pulled / (steps * step_s / o.workers),
      static_cast<double>(s.rows_pushed) / steps);
  std::printf("bytes per worker step: %.0f pulled, %.0f pushed (rows only)\n",
              static_cast<double>(s.rows_pulled) / steps * o.dim * 4,
              static_cast<double>(s.rows_pushed) / steps * (8 + o.dim * 4));
  std::printf("worker peak RSS: %.1f MB (largest of %d)\n", worker_peak / 1e6,
              o.workers);
  std::printf(
      "servers: %llu distinct rows held; table memory %.1f MB = %.1f "
      "bytes/row (ideal dim x 4 x (1 + %d slots) = %.0f); process "
      "RSS %.1f MB = %.1f bytes/row\n",
      static_cast<unsigned long long>(s.rows), s.table_bytes / 1e6,
      s.rows > 0 ? static_cast<double>(s.table_bytes) / s.rows : 0.0, slots,
      ideal, s.rss / 1e6,
      s.rows > 0 ? static_cast<double>(s.rss) / s.rows : 0.0);
  std::printf("servers' peak RSS: %.1f MB (largest of %d)\n", s.peak_rss / 1e6,
              o.servers);
  if (o.storage_bytes > 0) {
    std::printf(
        "storage {memory_bytes: %llu}: %llu rows on disk (%.1f MB of "
        "files), %llu moved out of memory, %llu read back by pushes\n",
        static_cast<unsigned long long>(o.storage_bytes),
        static_cast<unsigned long long>(s.rows_on_disk), s.disk_bytes / 1e6,
        static_cast<unsigned long long>(s.moved_out),
        static_cast<unsigned long long>(s.read_back));
  }
  if (!o.admission.empty() || !o.eviction.empty()) {
    std::printf(
        "admission {%s}: %llu row gradients dropped; eviction {%s}: %llu "
        "rows evicted\n",
        o.admission.c_str(),
        static_cast<unsigned long long>(s.rows_not_admitted),
        o.eviction.c_str(), static_cast<unsigned long long>(s.rows_evicted));
  }
  if (s.have_epoch) {
    std::printf(
        "log loss (progressive, the whole pass): %.4f; the teacher's %.4f "
        "(gap %.4f)\ntest accuracy: %.4f; the teacher's %.4f; always \"no "
        "click\" %.4f\n",
        s.epoch.train_loss(), train.teacher_loss,
        s.epoch.train_loss() - train.teacher_loss, s.epoch.test_accuracy(),
        test.teacher_accuracy, 1 - test.clicks);
    if (s.epoch.test_scored()) {
      std::printf(
          "test AUC: %.4f (within %.4f of the exact AUC of these scores); "
          "the teacher's %.4f; test log loss %.4f, the teacher's %.4f\n",
          s.epoch.test_auc(), s.epoch.test_auc_error(), test.teacher_auc,
          s.epoch.test_log_loss(), test.teacher_loss);
    }
  } else {
    std::printf("no epoch report on shard 0\n");
  }
}

// The workers' run: how long it took and the largest worker's peak RSS.
struct WorkerRun {
  double seconds = 0;
  int64_t worker_peak = 0;
};

// Runs o.workers paramd-workers on `job` against `servers` until all have
// ended; an error when one could not start or failed (naming it), or a
// server failed meanwhile.
absl::StatusOr<WorkerRun> RunWorkers(const BenchOptions& o,
                                     const std::string& job,
                                     ServerProcesses* servers) {
  Supervisor& supervisor = servers->supervisor();
  const std::string worker_binary = FindBinary("paramd-worker", "worker");
  const absl::Time start = absl::Now();
  std::vector<int> workers;
  for (int r = 0; r < o.workers; ++r) {
    absl::StatusOr<int> w = supervisor.Spawn(
        absl::StrCat("worker ", r),
        {worker_binary, "--job", job, "--rank", std::to_string(r), "--servers",
         absl::StrJoin(servers->addresses(), ","), "--log_level", "warning"});
    if (!w.ok()) return w.status();
    workers.push_back(*w);
  }
  int running = o.workers;
  bool killed = o.kill_after <= 0;
  while (running > 0) {
    if (!killed && absl::Now() - start >= absl::Seconds(o.kill_after)) {
      // The last server, SIGKILLed and started again from its checkpoint.
      const pid_t old = servers->pid(o.servers - 1);
      ASSIGN_OR_RETURN(const pid_t pid, servers->Restart(o.servers - 1));
      std::printf(
          "killed server %d (pid %d) after %d s; started again as "
          "pid %d\n",
          o.servers - 1, old, o.kill_after, pid);
      std::fflush(stdout);
      killed = true;
    }
    for (int i : servers->Poll(absl::Seconds(1))) {
      const ChildInfo& c = supervisor.child(i);
      bool is_worker = false;
      for (int w : workers) is_worker = is_worker || w == i;
      if (is_worker) --running;
      if (c.wait_status != 0) {
        return absl::InternalError(
            absl::StrCat(c.name, " ", Supervisor::DescribeExit(c.wait_status)));
      }
    }
  }
  WorkerRun run;
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (int w : workers) {
    run.worker_peak =
        std::max(run.worker_peak, supervisor.child(w).peak_rss_bytes);
  }
  return run;
}

int Driver(const BenchOptions& o) {
  char dir_template[] = "/tmp/paramd-rows-bench-XXXXXX";
  const char* made = mkdtemp(dir_template);
  if (made == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = made;
  // The folder goes on every way out (the servers, declared below, stop
  // first): the log, the job, the disk's rows, checkpoints, port files.
  absl::Cleanup remove_dir = [&dir, keep = o.keep_dir] {
    std::error_code e;
    if (!keep) std::filesystem::remove_all(dir, e);
  };
  const std::string train = dir + "/train.tsv", test = dir + "/test.tsv";
  const ClickLog log(o.log);
  const absl::Time write_start = absl::Now();
  absl::StatusOr<ClickLogFigures> train_figures =
      WriteClickLogFile(log, 0, o.samples, train);
  absl::StatusOr<ClickLogFigures> test_figures = WriteClickLogFile(
      log, kTestFirst, std::max<int64_t>(o.samples / 10, 1), test);
  if (!train_figures.ok() || !test_figures.ok()) {
    std::fprintf(
        stderr, "%s\n",
        (train_figures.ok() ? test_figures.status() : train_figures.status())
            .ToString()
            .c_str());
    return 1;
  }
  const std::string job = dir + "/click_log.yaml";
  std::ofstream(job) << JobYaml(o, dir, train, test);
  absl::StatusOr<JobConfig> config = LoadJobConfig(job);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "rows_bench: %lld samples of %d fields and %d dense (Zipf %.2f over "
      "2^32; %.1f%% clicks), written in %.1f s to %s; batch %d, %d worker(s) "
      "x %d server(s), dim %d, %s lr %s, %s%s%s\n",
      static_cast<long long>(o.samples), o.log.fields, o.log.dense, o.log.zipf,
      100 * train_figures->clicks,
      absl::ToDoubleSeconds(absl::Now() - write_start), dir.c_str(), o.batch,
      o.workers, o.servers, o.dim, o.optimizer.c_str(), o.lr.c_str(),
      o.policy.c_str(), o.table_policy.empty() ? "" : ", table ",
      o.table_policy.c_str());
  std::fflush(stdout);
  absl::StatusOr<std::unique_ptr<ServerProcesses>> servers =
      ServerProcesses::Start(FindBinary("paramd-server", "server"), job,
                             o.servers, dir, "rows");
  if (!servers.ok()) {
    std::fprintf(stderr, "%s\n", servers.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<WorkerRun> run = RunWorkers(o, job, servers->get());
  if (!run.ok()) {
    std::fprintf(stderr, "%s\n", std::string(run.status().message()).c_str());
    return 1;
  }
  const ServerTotals totals = QueryServers(**servers);
  if (!o.export_dir.empty()) {
    if (absl::Status s =
            ExportAndServe(*config, (*servers)->addresses(), o.export_dir);
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  servers->reset();
  PrintReport(o, *train_figures, *test_figures, run->seconds, run->worker_peak,
              totals);
  return 0;
}

int Main(int argc, char** argv) {
  SetUpProcess();
  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv,
                                                 {"samples",
                                                  "batch",
                                                  "workers",
                                                  "servers",
                                                  "dim",
                                                  "hidden",
                                                  "fields",
                                                  "optimizer",
                                                  "lr",
                                                  "policy",
                                                  "zipf",
                                                  "seed",
                                                  "index_bench",
                                                  "admission",
                                                  "eviction",
                                                  "export",
                                                  "table_policy",
                                                  "dense",
                                                  "bottom",
                                                  "storage",
                                                  "checkpoint_every",
                                                  "full_every",
                                                  "kill_server_after"},
                                                 {"keep_dir"});
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", flags.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<BenchOptions> o = ParseOptions(*flags);
  if (!o.ok()) {
    std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
    return 2;
  }
  if (flags->Has("index_bench")) {
    return IndexBench(std::stoll(flags->Get("index_bench", "10000000")));
  }
  return Driver(*o);
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
