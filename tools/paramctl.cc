// paramctl: run, validate and inspect paramd jobs.
//
//   paramctl run J.yaml [--resume | --fresh] [--make-secrets] [--summary PATH]
//                [--log_level LEVEL]
//   paramctl checkpoint --job J.yaml [--servers HOST:PORT,...]
//   paramctl export --job J.yaml --out DIR [--since N|newest]
//                   [--servers HOST:PORT,...]
//   paramctl validate J.yaml
//   paramctl status --job J.yaml [--servers HOST:PORT,...]
//                   [--backups HOST:PORT,...] [--json] [--watch]
//   paramctl slurm J.yaml [--partition P] [--time T] [--gpus-per-worker G]
//                  [--nodes N] [--logs DIR] [--output FILE]
//   paramctl k8s J.yaml [--image I] [--namespace N] [--output FILE]
//   paramctl trace DIR [--output FILE]
//   paramctl trace --job J.yaml [--steps N] [--from-step S] [--dir DIR]
//                  [--wait SECONDS] [--servers HOST:PORT,...]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/binaries.h"
#include "common/base/flags.h"
#include "common/base/process_setup.h"
#include "common/config/job_config.h"
#include "common/config/job_file.h"
#include "common/config/layer_shapes.h"
#include "common/launch/slurm.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/trace/trace_events.h"
#include "server/checkpoint/file_system.h"
#include "tools/ctl/export_job.h"
#include "tools/ctl/job_runner.h"
#include "tools/ctl/job_target.h"
#include "tools/ctl/live_trace.h"
#include "tools/ctl/local_coordinator.h"
#include "tools/ctl/rpc/status_client.h"
#include "tools/ctl/status_command.h"
#include "tools/deploy/k8s_manifests.h"
#include "tools/deploy/slurm_script.h"

namespace paramd {
namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  paramctl run J.yaml [--resume | --fresh] [--make-secrets] "
    "[--summary PATH]\n"
    "               [--log_level LEVEL]\n"
    "               [--server_binary PATH] [--worker_binary PATH]\n"
    "               [--python_path DIR]\n"
    "  paramctl validate J.yaml\n"
    "  paramctl status --job J.yaml [--servers HOST:PORT,...] "
    "[--backups HOST:PORT,...] [--json] [--watch]\n"
    "  paramctl checkpoint --job J.yaml [--servers HOST:PORT,...]\n"
    "  paramctl export --job J.yaml --out DIR [--since N|newest] "
    "[--servers HOST:PORT,...]\n"
    "  paramctl slurm J.yaml [--partition P] [--time T] [--gpus-per-worker G]\n"
    "                 [--nodes N] [--logs DIR] [--output FILE] "
    "[--etcd_binary PATH]\n"
    "  paramctl k8s J.yaml [--image I] [--namespace N] [--output FILE]\n"
    "  paramctl trace DIR [--output FILE]\n"
    "  paramctl trace --job J.yaml [--steps N] [--from-step S] [--dir DIR]\n"
    "                 [--wait SECONDS] [--servers HOST:PORT,...]\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "paramctl: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

// The job file at `path`; nothing after printing why it is wrong.
std::optional<JobConfig> LoadOrSay(const std::string& path) {
  absl::StatusOr<JobConfig> config = LoadJobConfig(path);
  if (!config.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(config.status().message()).c_str());
    return std::nullopt;
  }
  return *std::move(config);
}

// The Python package's folder for a worker.command's PYTHONPATH, absolute:
// --python_path, else the one Bazel built beside paramctl
// (bazel build //python:package); empty when neither is given or built.
std::string PythonPackage(const ParsedFlags& flags) {
  std::string path = flags.Get("python_path", "");
  if (path.empty()) {
    path = FindBinary("package", "python", R_OK);
    if (!std::filesystem::is_directory(path)) return "";
  }
  return std::filesystem::absolute(path).lexically_normal().string();
}

// The model as validate prints it: the layer graph, or a framework's
// tensors.
std::string ModelDescription(const JobConfig& config) {
  if (config.model.type == ModelType::kTensors) {
    return absl::StrCat(config.model.tensors.size(),
                        " tensor(s) of a framework's model, first '",
                        config.model.tensors.front().name, "'");
  }
  return DescribeGraph(*InferLayerGraph(config.model));
}

int Validate(const std::string& path) {
  std::optional<JobConfig> config = LoadOrSay(path);
  if (!config) return 1;
  if (config->awaits_declaration()) {
    // No plan until a worker declares what the job file leaves out.
    std::printf(
        "%s: ok\n  job '%s', policy %s, %d server(s), %d worker(s), %d "
        "epoch(s) of batch %d\n  model tensors: a framework's model whose "
        "workers declare its %s\n",
        path.c_str(), config->job_id.c_str(), PolicyName(config->policy.type),
        config->num_shards(), config->num_workers, config->training.epochs,
        config->training.batch_size,
        config->model.tensors_declared
            ? (config->optimizer_declared ? "tensors and optimizer" : "tensors")
            : "optimizer");
    return 0;
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
      "epoch(s) of batch %d\n  model %s %s: %lld parameters in %zu chunk(s); "
      "bytes per shard: %s\n",
      path.c_str(), config->job_id.c_str(), PolicyName(config->policy.type),
      config->num_shards(), config->num_workers, config->training.epochs,
      config->training.batch_size, ModelTypeName(config->model.type),
      ModelDescription(*config).c_str(),
      static_cast<long long>(spec.total_elements), plan->chunks().size(),
      absl::StrJoin(shard_bytes, ", ").c_str());
  for (const EmbeddingTableConfig& t : config->model.embeddings) {
    std::printf(
        "  table '%s': %llu rows x %d, %s (lr %g), rows spread over the %d "
        "server(s) by hash%s\n",
        t.name.c_str(), static_cast<unsigned long long>(t.rows), t.dim,
        t.optimizer.c_str(), t.learning_rate, config->num_shards(),
        t.max_rows > 0
            ? absl::StrCat(", at most ", t.max_rows, " per server").c_str()
            : "");
  }
  return 0;
}

// Asks every shard to write a checkpoint now.
int Checkpoint(const ParsedFlags& flags) {
  int code = 0;
  std::optional<Target> target = LoadTarget(flags, "checkpoint", &code);
  if (!target) return code;
  int failed = 0;
  for (size_t k = 0; k < target->addresses.size(); ++k) {
    absl::StatusOr<proto::CheckpointResponse> written = RequestCheckpoint(
        target->addresses[k], target->security, absl::Seconds(60));
    if (written.ok()) {
      std::printf("shard %zu (%s): version %llu written to %s\n", k,
                  target->addresses[k].c_str(),
                  static_cast<unsigned long long>(written->version()),
                  written->path().c_str());
    } else {
      ++failed;
      std::printf("shard %zu (%s): %s\n", k, target->addresses[k].c_str(),
                  std::string(written.status().message()).c_str());
    }
  }
  return failed == 0 ? 0 : 1;
}

// Writes the job's model, or what changed since an export, into --out.
int Export(const ParsedFlags& flags) {
  int code = 0;
  std::optional<Target> target = LoadTarget(flags, "export", &code);
  if (!target) return code;
  if (!flags.Has("out")) return Usage("export needs --out DIR");
  ExportOptions options;
  options.addresses = target->addresses;
  options.security = target->security;
  options.out = flags.Get("out", "");
  if (flags.Has("since")) {
    options.incremental = true;
    const std::string since = flags.Get("since", "newest");
    if (since != "newest" &&
        (!absl::SimpleAtoi(since, &options.since) || options.since == 0)) {
      return Usage("--since takes an export's sequence (1, 2, ...) or newest");
    }
  }
  absl::StatusOr<ExportSummary> done =
      ExportJob(target->config, options, LocalFileSystem());
  if (!done.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(done.status().message()).c_str());
    return 1;
  }
  std::printf(
      "export %llu%s: %llu rows, %llu dropped ids, %llu tensor values; shard "
      "versions %s; %s (read %.1f s, ordered %.1f s, written %.1f s)\n",
      static_cast<unsigned long long>(done->sequence),
      done->base > 0
          ? absl::StrCat(" (changes since export ", done->base, ")").c_str()
          : " (whole)",
      static_cast<unsigned long long>(done->rows),
      static_cast<unsigned long long>(done->dropped),
      static_cast<unsigned long long>(done->tensor_values),
      absl::StrJoin(done->versions, ",").c_str(), done->manifest.c_str(),
      done->read_seconds, done->order_seconds, done->write_seconds);
  return 0;
}

// Writes `text` to --output (saying so) or to stdout.
int WriteOutput(const ParsedFlags& flags, const std::string& text,
                const std::string& then) {
  if (!flags.Has("output")) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  const std::string out = flags.Get("output", "");
  FILE* f = std::fopen(out.c_str(), "w");
  if (f == nullptr || std::fputs(text.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "paramctl: cannot write %s\n", out.c_str());
    return 1;
  }
  std::printf("wrote %s: %s %s\n", out.c_str(), then.c_str(), out.c_str());
  return 0;
}

// Writes the Slurm batch script of a job (tools/deploy/slurm_script.h).
int Slurm(const std::string& path, const ParsedFlags& flags) {
  std::optional<JobConfig> config = LoadOrSay(path);
  if (!config) return 1;
  // Absolute: the script runs on other nodes, from another folder.
  auto absolute = [](const std::string& p) {
    return std::filesystem::absolute(p).lexically_normal().string();
  };
  SlurmScriptOptions options;
  options.job_path = absolute(path);
  options.server_binary = absolute(
      flags.Get("server_binary", FindBinary("paramd-server", "server")));
  options.worker_binary = absolute(
      flags.Get("worker_binary", FindBinary("paramd-worker", "worker")));
  options.python_path = PythonPackage(flags);
  options.log_dir = absolute(flags.Get("logs", "."));
  options.partition = flags.Get("partition", "");
  options.time = flags.Get("time", "");
  // A replicated job's own etcd, when the job names none (SlurmStartsEtcd).
  options.etcd_binary = flags.Get("etcd_binary", FindEtcd());
  if (!options.etcd_binary.empty()) {
    options.etcd_binary = absolute(options.etcd_binary);
  }
  for (auto [flag, out] :
       {std::pair{"nodes", &options.nodes},
        std::pair{"gpus-per-worker", &options.gpus_per_worker}}) {
    absl::StatusOr<int> value = flags.GetInt(flag, 0);
    if (!value.ok()) return Usage(std::string(value.status().message()));
    *out = *value;
  }
  absl::StatusOr<std::string> script = SlurmBatchScript(*config, options);
  if (!script.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(script.status().message()).c_str());
    return 1;
  }
  if (config->replication.enabled() && config->coordination.etcd.empty()) {
    std::fprintf(stderr, "%s\n",
                 SlurmStartsEtcd(*config, options)
                     ? absl::StrCat("paramctl: the job's replicas are fenced "
                                    "by an etcd of its own (",
                                    options.etcd_binary, ", on its first node)")
                           .c_str()
                     : "paramctl: no etcd found (Debian's etcd-server, or "
                       "--etcd_binary PATH): replicas without a fence");
  }
  const int code = WriteOutput(flags, *script, "submit it with sbatch");
  if (code == 0 && flags.Has("output")) {
    std::filesystem::permissions(
        flags.Get("output", ""),
        std::filesystem::perms::owner_exec | std::filesystem::perms::group_exec,
        std::filesystem::perm_options::add);
  }
  return code;
}

// Writes the Kubernetes manifests of a job (tools/deploy/k8s_manifests.h).
int K8s(const std::string& path, const ParsedFlags& flags) {
  std::optional<JobConfig> config = LoadOrSay(path);
  if (!config) return 1;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  K8sOptions options;
  options.job_text = text.str();
  options.image = flags.Get("image", options.image);
  options.namespace_name = flags.Get("namespace", options.namespace_name);
  absl::StatusOr<std::string> manifests = K8sManifests(*config, options);
  if (!manifests.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(manifests.status().message()).c_str());
    return 1;
  }
  return WriteOutput(flags, *manifests, "apply it with kubectl apply -f");
}

void SayTraceWritten(const std::string& path) {
  std::printf(
      "paramctl: step timeline written to %s (open it in Perfetto or "
      "chrome://tracing)\n",
      path.c_str());
}

// Merges the step timelines in `dir` into `output` (dir/trace.json when
// empty); says where.
int MergeTrace(const std::string& dir, std::string output) {
  if (output.empty()) output = dir + "/trace.json";
  if (absl::Status s = TraceEvents::MergeTo(dir, output); !s.ok()) {
    std::fprintf(stderr, "paramctl: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  SayTraceWritten(output);
  return 0;
}

// paramctl trace --job J: a timeline of the running job.
int TraceJob(const ParsedFlags& flags) {
  int code = 0;
  std::optional<Target> target = LoadTarget(flags, "trace", &code);
  if (!target) return code;
  LiveTraceOptions options;
  options.addresses = target->addresses;
  options.security = &target->security;
  options.heartbeat_seconds = target->heartbeat_seconds;
  options.dir = flags.Get(
      "dir",
      absl::StrCat("trace-", absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(),
                                              absl::UTCTimeZone())));
  int steps = static_cast<int>(options.steps), from = -1,
      wait = static_cast<int>(absl::ToInt64Seconds(options.wait));
  for (auto [flag, out] :
       {std::pair{"steps", &steps}, std::pair{"from-step", &from},
        std::pair{"wait", &wait}}) {
    absl::StatusOr<int> value = flags.GetInt(flag, *out);
    if (!value.ok()) return Usage(std::string(value.status().message()));
    if (flags.Has(flag) && *value < 0) {
      return Usage(absl::StrCat("--", flag, " must be >= 0"));
    }
    *out = *value;
  }
  options.steps = static_cast<uint64_t>(steps);
  if (from >= 0) options.from_step = static_cast<uint64_t>(from);
  options.wait = absl::Seconds(wait);
  absl::StatusOr<std::string> written = TraceRunningJob(options);
  if (!written.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(written.status().message()).c_str());
    return 1;
  }
  SayTraceWritten(*written);
  return 0;
}

// RunJob, and with tracing.dir the job's timelines merged at its end (the
// folder's earlier timelines are removed first: they are another run's).
int RunAndTrace(const RunOptions& options) {
  absl::StatusOr<JobConfig> config = LoadJobConfig(options.job_path);
  const bool tracing = config.ok() && config->tracing.on();
  if (tracing) {
    std::error_code ignored;
    for (const auto& e :
         std::filesystem::directory_iterator(config->tracing.dir, ignored)) {
      if (e.path().extension() == ".jsonl") {
        std::filesystem::remove(e.path(), ignored);
      }
    }
  }
  const int code = RunJob(options);
  if (!tracing) return code;
  const int merged = MergeTrace(config->tracing.dir, "");
  return code != 0 ? code : merged;
}

int Main(int argc, char** argv) {
  ChooseGrpcPoller();
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv,
                 {"summary",
                  "log_level",
                  "job",
                  "servers",
                  "backups",
                  "server_binary",
                  "worker_binary",
                  "python_path",
                  "partition",
                  "time",
                  "gpus-per-worker",
                  "nodes",
                  "etcd_binary",
                  "logs",
                  "output",
                  "image",
                  "namespace",
                  "steps",
                  "from-step",
                  "wait",
                  "dir",
                  "out",
                  "since"},
                 {"json", "watch", "make-secrets", "resume", "fresh"});
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
    options.resume = flags->Has("resume");
    options.fresh = flags->Has("fresh");
    options.server_binary =
        flags->Get("server_binary", FindBinary("paramd-server", "server"));
    options.worker_binary =
        flags->Get("worker_binary", FindBinary("paramd-worker", "worker"));
    options.python_path = PythonPackage(*flags);
    return RunAndTrace(options);
  }
  if (command == "trace" && flags->Has("job")) {
    if (args.size() != 1) return Usage("trace --job takes no folder (--dir)");
    return TraceJob(*flags);
  }
  if (command == "trace") {
    if (args.size() != 2) return Usage("trace takes the tracing.dir folder");
    return MergeTrace(args[1], flags->Get("output", ""));
  }
  if (command == "slurm") {
    if (args.size() != 2) return Usage("slurm takes one job file");
    return Slurm(args[1], *flags);
  }
  if (command == "k8s") {
    if (args.size() != 2) return Usage("k8s takes one job file");
    return K8s(args[1], *flags);
  }
  if (command == "status") return StatusCommand(*flags);
  if (command == "checkpoint") return Checkpoint(*flags);
  if (command == "export") return Export(*flags);
  return Usage("unknown command '" + command + "'");
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
