#include "common/config/job_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"
#include "common/config/yaml_reader.h"

namespace paramd {
namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return absl::StrCat(base_dir, "/", path);
}

class JobParser {
 public:
  JobParser(const std::string& path, const JobFileChecks& checks)
      : r_(path), path_(path), checks_(checks) {}

  absl::StatusOr<JobConfig> Parse(const YAML::Node& root) {
    JobConfig c;
    c.path = path_;
    if (!root.IsDefined() || root.IsNull()) {
      return r_.ErrorAtLine(1, "(document)", "the job file is empty");
    }
    RETURN_IF_ERROR(r_.CheckMapping(
        root, "",
        {"job",         "cluster",     "model",     "data",        "training",
         "optimizer",   "policy",      "guard",     "liveness",    "limits",
         "security",    "checkpoint",  "restart",   "replication", "metrics",
         "tracing",     "compression", "partition", "worker",      "testing",
         "coordination"}));
    for (auto step :
         {&JobParser::ParseJob,         &JobParser::ParseCluster,
          &JobParser::ParseModel,       &JobParser::ParseData,
          &JobParser::ParseTraining,    &JobParser::ParseOptimizer,
          &JobParser::ParsePolicy,      &JobParser::ParseGuard,
          &JobParser::ParseLiveness,    &JobParser::ParseLimits,
          &JobParser::ParseSecurity,    &JobParser::ParseCheckpoint,
          &JobParser::ParseRestart,     &JobParser::ParseReplication,
          &JobParser::ParseMetrics,     &JobParser::ParseTracing,
          &JobParser::ParseCompression, &JobParser::ParsePartition,
          &JobParser::ParseWorker,      &JobParser::ParseTesting,
          &JobParser::ParseCoordination}) {
      RETURN_IF_ERROR((this->*step)(root, &c));
    }
    return c;
  }

 private:
  // Returns the section `name` of `root`, checking its keys. A missing
  // optional section yields an empty mapping.
  absl::StatusOr<YAML::Node> Section(const YAML::Node& root,
                                     const std::string& name, bool required,
                                     const std::set<std::string>& keys) {
    YAML::Node node = root[name];
    if (!node.IsDefined() || node.IsNull()) {
      if (required) {
        return r_.MissingError(root, "", name, "missing required section");
      }
      return YAML::Node(YAML::NodeType::Map);
    }
    RETURN_IF_ERROR(r_.CheckMapping(node, name, keys));
    return node;
  }

  absl::Status ParseJob(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node job,
                     Section(root, "job", true, {"id", "seed"}));
    RETURN_IF_ERROR(r_.Get(job, "job", "id", true, &c->job_id));
    if (c->job_id.empty()) {
      return r_.Error(job["id"], "job.id", "must not be empty");
    }
    return r_.Get(job, "job", "seed", false, &c->seed);
  }

  absl::Status ParseCluster(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node cluster,
                     Section(root, "cluster", true, {"servers", "workers"}));
    return ParseClusterSection(r_, cluster, c);
  }

  absl::Status ParseModel(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node model,
        Section(root, "model", true,
                {"type", "input", "layers", "embeddings", "features", "tensors",
                 "tensors_file", "initial_values"}));
    RETURN_IF_ERROR(ParseModelSection(r_, model, Resolver(), &c->model));
    for (EmbeddingTableConfig& t : c->model.embeddings) {
      if (t.storage.enabled()) t.storage.dir = Resolver()(t.storage.dir);
    }
    return absl::OkStatus();
  }

  absl::Status ParseData(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node data,
        Section(root, "data", false,
                {"format", "dir", "train_images", "train_labels", "test_images",
                 "test_labels", "train_file", "test_file", "train_limit",
                 "test_limit", "augment"}));
    RETURN_IF_ERROR(ParseDataSection(r_, data, Resolver(),
                                     checks_.data_files_readable, &c->data));
    // What the model's first layer reads must be what the data holds.
    const ModelType type = c->model.type;
    if (c->data.format == DataFormat::kClicks &&
        type != ModelType::kEmbeddingBag &&
        type != ModelType::kEmbeddingConcat && type != ModelType::kTensors) {
      return r_.Error(data["format"], "data.format",
                      "a click log's samples are ids: its model starts with "
                      "an embedding_bag or embedding_concat layer");
    }
    if (c->data.format == DataFormat::kIdx &&
        type == ModelType::kEmbeddingConcat) {
      return r_.Error(data, "data.format",
                      "an embedding_concat model reads a click log's fields: "
                      "set data.format: clicks with data.train_file");
    }
    // An embedding_bag's fields are a click log's tokens per line.
    const std::vector<LayerConfig>& graph = c->model.graph;
    if (!graph.empty() && graph[0].kind == LayerKind::kEmbeddingBag) {
      const bool clicks = c->data.format == DataFormat::kClicks;
      if (clicks != (graph[0].fields > 0)) {
        return r_.Error(
            root["model"]["layers"][0], "model.layers[0].embedding_bag.fields",
            clicks ? "a click log's bag needs the tokens per line (fields)"
                   : "applies to data.format clicks only (an image gives its "
                     "own features)");
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseTraining(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node t,
        Section(root, "training", true, {"epochs", "batch_size", "shuffle"}));
    TrainingConfig& tc = c->training;
    RETURN_IF_ERROR(r_.Get(t, "training", "epochs", true, &tc.epochs));
    if (tc.epochs < 1 || tc.epochs > 100000) {
      return r_.Error(t["epochs"], "training.epochs",
                      "must be between 1 and 100000");
    }
    RETURN_IF_ERROR(r_.Get(t, "training", "batch_size", true, &tc.batch_size));
    if (tc.batch_size < 1 || tc.batch_size > (1 << 20)) {
      return r_.Error(t["batch_size"], "training.batch_size",
                      "must be between 1 and 1048576");
    }
    RETURN_IF_ERROR(r_.Get(t, "training", "shuffle", false, &tc.shuffle));
    if (c->data.format == DataFormat::kClicks) {
      // Streamed from the file, in its order.
      if (t["shuffle"].IsDefined() && tc.shuffle) {
        return r_.Error(t["shuffle"], "training.shuffle",
                        "a click log is read in file order, streamed (shuffle "
                        "the file itself); set shuffle: false");
      }
      tc.shuffle = false;
    }
    return absl::OkStatus();
  }

  absl::Status ParseOptimizer(const YAML::Node& root, JobConfig* c) {
    const YAML::Node given = root["optimizer"];
    if (c->model.type == ModelType::kTensors &&
        (!given.IsDefined() || given.IsNull())) {
      // A framework's workers declare their own (paramd.torch maps the
      // script's torch.optim optimizer).
      c->optimizer_declared = true;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(const YAML::Node o,
                     Section(root, "optimizer", true, OptimizerSectionKeys()));
    return ParseOptimizerSection(r_, o, &c->optimizer);
  }

  absl::Status ParsePolicy(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node p,
                     Section(root, "policy", true, PolicySectionKeys()));
    RETURN_IF_ERROR(ParsePolicySection(r_, p, *c, &c->policy));
    return CheckTablePolicies(r_, root["model"]["embeddings"], c->policy,
                              c->model);
  }

  absl::Status ParseGuard(const YAML::Node& root, JobConfig* c) {
    if (!root["guard"].IsDefined() || root["guard"].IsNull()) {
      return absl::OkStatus();  // off
    }
    ASSIGN_OR_RETURN(const YAML::Node g,
                     Section(root, "guard", false, GuardSectionKeys()));
    return ParseGuardSection(r_, g, &c->guard);
  }

  absl::Status ParseLiveness(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node l,
                     Section(root, "liveness", false,
                             {"lease_seconds", "heartbeat_seconds",
                              "stall_warn_seconds", "warn_after_seconds",
                              "give_up_seconds", "keepalive_seconds"}));
    LivenessConfig& lc = c->liveness;
    // warn_after_seconds: the key's older name.
    if (l["warn_after_seconds"].IsDefined() &&
        l["stall_warn_seconds"].IsDefined()) {
      return r_.Error(l["warn_after_seconds"], "liveness.warn_after_seconds",
                      "is the older name of liveness.stall_warn_seconds; "
                      "give one of them");
    }
    const char* stall = l["warn_after_seconds"].IsDefined()
                            ? "warn_after_seconds"
                            : "stall_warn_seconds";
    for (auto [key, out] :
         {std::pair{"lease_seconds", &lc.lease_seconds},
          std::pair{"heartbeat_seconds", &lc.heartbeat_seconds},
          std::pair{stall, &lc.stall_warn_seconds},
          std::pair{"give_up_seconds", &lc.give_up_seconds},
          std::pair{"keepalive_seconds", &lc.keepalive_seconds}}) {
      RETURN_IF_ERROR(r_.Get(l, "liveness", key, false, out));
      if (!(*out > 0) || *out > 86400) {
        return r_.Error(l[key], absl::StrCat("liveness.", key),
                        "must be > 0 and at most 86400 seconds");
      }
    }
    if (lc.heartbeat_seconds * 2 > lc.lease_seconds) {
      const YAML::Node at = l["heartbeat_seconds"].IsDefined()
                                ? l["heartbeat_seconds"]
                                : l["lease_seconds"];
      return r_.Error(at, "liveness.heartbeat_seconds",
                      "must be at most half of liveness.lease_seconds, or "
                      "live workers would lose their lease");
    }
    if (lc.keepalive_seconds < 2 * lc.heartbeat_seconds) {
      const YAML::Node at = l["keepalive_seconds"].IsDefined()
                                ? l["keepalive_seconds"]
                                : l["heartbeat_seconds"];
      return r_.Error(at, "liveness.keepalive_seconds",
                      "must be at least twice liveness.heartbeat_seconds: a "
                      "busy worker answers the servers' pings when it "
                      "calls, at least at every heartbeat");
    }
    return absl::OkStatus();
  }

  // The sections of run_sections.cc: each reads its keys there.
  absl::Status ParseLimits(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node l,
                     Section(root, "limits", false,
                             {"max_inflight_per_worker", "transport_memory_mb",
                              "stream_window_kb"}));
    return ParseLimitsSection(r_, l, &c->limits);
  }

  absl::Status ParseSecurity(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node sec,
        Section(root, "security", false,
                {"token_file", "tls_cert", "tls_key", "tls_ca", "mutual_tls",
                 "tls_client_cert", "tls_client_key", "tls_server_name"}));
    return ParseSecuritySection(r_, sec, Resolver(), &c->security);
  }

  absl::Status ParseCheckpoint(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node ck,
        Section(root, "checkpoint", false,
                {"enabled", "dir", "every_steps", "keep", "full_every"}));
    return ParseCheckpointSection(r_, ck, Resolver(), &c->checkpoint);
  }

  absl::Status ParseRestart(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node r, Section(root, "restart", false,
                                                 {"max", "backoff_seconds"}));
    return ParseRestartSection(r_, r, &c->restart);
  }

  absl::Status ParseReplication(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node r, Section(root, "replication", false,
                                                 {"factor", "backups"}));
    RETURN_IF_ERROR(ParseReplicationSection(r_, r, *c, &c->replication));
    for (size_t i = 0; i < c->model.embeddings.size(); ++i) {
      if (c->replication.enabled() &&
          c->model.embeddings[i].storage.enabled()) {
        // A backup takes whole states; a table on disk is not sent whole.
        return r_.Error(r["factor"], "replication.factor",
                        absl::StrCat("does not apply to a job whose table "
                                     "model.embeddings[",
                                     i, "] has storage (rows on disk)"));
      }
    }
    if (c->replication.enabled() && c->awaits_declaration()) {
      // A backup learns its model from the job file alone.
      return r_.Error(
          r["factor"], "replication.factor",
          absl::StrCat("a replicated shard needs its model in the "
                       "job file: give ",
                       c->model.tensors_declared ? "model.tensors_file (or "
                                                   "model.tensors)"
                                                 : "an optimizer section",
                       " instead of the workers' declaration"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseCoordination(const YAML::Node& root, JobConfig* c) {
    if (!root["coordination"].IsDefined()) {
      if (!c->servers_from_etcd) return absl::OkStatus();
      return r_.Error(root["cluster"]["servers"], "cluster.servers",
                      "{etcd: N} needs a coordination section naming etcd "
                      "(coordination.etcd), where the servers register");
    }
    ASSIGN_OR_RETURN(
        const YAML::Node n,
        Section(root, "coordination", false,
                {"etcd", "lease_seconds", "tls_ca", "tls_cert", "tls_key",
                 "tls_server_name", "user", "password_file"}));
    return ParseCoordinationSection(r_, n, Resolver(), &c->coordination);
  }

  absl::Status ParseMetrics(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node m,
                     Section(root, "metrics", false, {"port", "bind"}));
    return ParseMetricsSection(r_, m, &c->metrics);
  }

  absl::Status ParseTracing(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node t,
        Section(root, "tracing", false, {"dir", "from_step", "steps"}));
    return ParseTracingSection(r_, t, Resolver(), &c->tracing);
  }

  absl::Status ParseCompression(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node n,
        Section(root, "compression", false,
                {"type", "ratio", "error_feedback", "momentum", "pull"}));
    RETURN_IF_ERROR(ParseCompressionSection(r_, n, &c->compression));
    // Momentum correction replaces the servers' momentum, never adds to it.
    if (c->compression.momentum > 0 &&
        (c->optimizer.type != "sgd" || c->optimizer.momentum != 0)) {
      return r_.Error(n["momentum"], "compression.momentum",
                      "moves SGD's momentum to the workers: it needs "
                      "optimizer.type sgd with optimizer.momentum 0");
    }
    return absl::OkStatus();
  }

  // Resolves paths against the job file's folder.
  PathResolver Resolver() const {
    return [dir = DirName(path_)](const std::string& p) {
      return Resolve(dir, p);
    };
  }

  absl::Status ParseTesting(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node t,
        Section(root, "testing", false,
                {"slow_rank", "slow_step_ms", "drop_reply_probability",
                 "delay_reply_ms", "link_mbps"}));
    return ParseTestingSection(r_, t, c->num_workers, &c->testing);
  }

  absl::Status ParsePartition(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(const YAML::Node p,
                     Section(root, "partition", false, {"chunk_bytes"}));
    RETURN_IF_ERROR(
        r_.Get(p, "partition", "chunk_bytes", false, &c->chunk_bytes));
    if (c->chunk_bytes < 4 || c->chunk_bytes > (int64_t{1} << 30) ||
        c->chunk_bytes % 4 != 0) {
      return r_.Error(p["chunk_bytes"], "partition.chunk_bytes",
                      "must be a multiple of 4 between 4 and 1073741824");
    }
    return absl::OkStatus();
  }

  absl::Status ParseWorker(const YAML::Node& root, JobConfig* c) {
    ASSIGN_OR_RETURN(
        const YAML::Node w,
        Section(root, "worker", false,
                {"device", "threads", "blas_core", "allow_tf32", "overlap",
                 "command", "shared_memory", "slice_bytes"}));
    return ParseWorkerSection(r_, w, *c, &c->worker);
  }

  YamlReader r_;
  std::string path_;
  JobFileChecks checks_;
};

// INVALID_ARGUMENT naming the key when a mapping in `node` (at `field`,
// dotted; "" at the top) has a key twice: YAML leaves such a file's meaning
// undefined, and yaml-cpp would read the first and drop the second.
absl::Status CheckNoDuplicateKeys(const YAML::Node& node,
                                  const std::string& path,
                                  const std::string& field) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      RETURN_IF_ERROR(CheckNoDuplicateKeys(node[i], path,
                                           absl::StrCat(field, "[", i, "]")));
    }
    return absl::OkStatus();
  }
  if (!node.IsMap()) return absl::OkStatus();
  std::map<std::string, int> first_line;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) continue;
    const std::string key = entry.first.Scalar();
    const std::string at = field.empty() ? key : absl::StrCat(field, ".", key);
    const int line = entry.first.Mark().line + 1;
    if (auto [it, fresh] = first_line.emplace(key, line); !fresh) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: %s: given twice (first at line %d); give each key once", path,
          line, at, it->second));
    }
    RETURN_IF_ERROR(CheckNoDuplicateKeys(entry.second, path, at));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::string& path,
                                         const JobFileChecks& checks) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (syntax): %s", path,
                        e.mark.is_null() ? 1 : e.mark.line + 1, e.msg));
  }
  try {
    RETURN_IF_ERROR(CheckNoDuplicateKeys(root, path, ""));
    return JobParser(path, checks).Parse(root);
  } catch (const YAML::Exception& e) {
    // Defensive: yaml-cpp reports misuse (e.g. indexing a scalar) by
    // throwing; no exception leaves this module.
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: (structure): %s", path,
                        e.mark.is_null() ? 1 : e.mark.line + 1, e.msg));
  }
}

absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path,
                                        const JobFileChecks& checks) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(
        absl::StrCat(path, ":0: (file): cannot open the job file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobConfig(text.str(), path, checks);
}

}  // namespace paramd
