#include "common/job_config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace paramd {
namespace {

constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";

// Error context for one job file: turns (node, field, message) into the
// one-line "FILE:LINE: FIELD: message" form.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  absl::Status Error(const YAML::Node& at, const std::string& field,
                     const std::string& message) const {
    return ErrorAtLine(LineOf(at), field, message);
  }

  absl::Status ErrorAtLine(int line, const std::string& field,
                           const std::string& message) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s:%d: %s: %s", file_, line,
                        field.empty() ? "(document)" : field, message));
  }

  // A required `field` is absent from the mapping `parent` (named
  // `parent_field`): point at the parent's own key when it has one.
  absl::Status MissingError(const YAML::Node& parent,
                            const std::string& parent_field,
                            const std::string& field,
                            const std::string& message) const {
    auto it = key_lines_.find(parent_field);
    return ErrorAtLine(it != key_lines_.end() ? it->second : LineOf(parent),
                       field, message);
  }

  static int LineOf(const YAML::Node& node) {
    if (!node.IsDefined()) return 1;
    const YAML::Mark mark = node.Mark();
    return mark.is_null() ? 1 : mark.line + 1;
  }

  // `node` must be a mapping whose keys are all in `allowed`.
  // Records the line of each key, for MissingError.
  absl::Status CheckMapping(const YAML::Node& node, const std::string& field,
                            const std::set<std::string>& allowed) {
    if (!node.IsMap()) return Error(node, field, "expected a mapping");
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.Scalar();
      key_lines_[Join(field, key)] = LineOf(it->first);
      if (allowed.count(key) == 0) {
        return Error(it->first, Join(field, key),
                     absl::StrCat("unknown key (allowed here: ",
                                  absl::StrJoin(allowed, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  // Reads scalar `key` of mapping `parent` into `out`. A missing key is an
  // error when `required`, and otherwise leaves `out` as it was.
  template <typename T>
  absl::Status Get(const YAML::Node& parent, const std::string& parent_field,
                   const std::string& key, bool required, T* out) const {
    const std::string field = Join(parent_field, key);
    const YAML::Node node = parent[key];
    if (!node.IsDefined() || node.IsNull()) {
      if (required) {
        return MissingError(parent, parent_field, field,
                            "missing required field");
      }
      return absl::OkStatus();
    }
    if (!node.IsScalar()) {
      return Error(node, field, absl::StrCat("expected ", TypeName<T>(),
                                             ", got a ", KindName(node)));
    }
    if (!Convert(node.Scalar(), out)) {
      return Error(node, field,
                   absl::StrCat("expected ", TypeName<T>(), ", got '",
                                node.Scalar(), "'"));
    }
    return absl::OkStatus();
  }

  static std::string Join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : absl::StrCat(parent, ".", key);
  }

  static std::string KindName(const YAML::Node& node) {
    if (node.IsMap()) return "mapping";
    if (node.IsSequence()) return "sequence";
    return "scalar";
  }

 private:
  template <typename T>
  static const char* TypeName() {
    if constexpr (std::is_same_v<T, bool>) return "a boolean";
    if constexpr (std::is_integral_v<T>) return "an integer";
    if constexpr (std::is_floating_point_v<T>) return "a number";
    return "a string";
  }

  static bool Convert(const std::string& s, std::string* out) {
    *out = s;
    return true;
  }
  static bool Convert(const std::string& s, bool* out) {
    if (s == "true" || s == "True" || s == "yes") return *out = true, true;
    if (s == "false" || s == "False" || s == "no") return *out = false, true;
    return false;
  }
  static bool Convert(const std::string& s, int64_t* out) {
    return absl::SimpleAtoi(s, out);
  }
  static bool Convert(const std::string& s, uint64_t* out) {
    return absl::SimpleAtoi(s, out);
  }
  static bool Convert(const std::string& s, int* out) {
    return absl::SimpleAtoi(s, out);
  }
  static bool Convert(const std::string& s, double* out) {
    return absl::SimpleAtod(s, out) && std::isfinite(*out);
  }

  std::string file_;
  std::map<std::string, int> key_lines_;  // Dotted field → line of its key.
};

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
  JobParser(const std::string& path) : r_(path), path_(path) {}

  absl::StatusOr<JobConfig> Parse(const YAML::Node& root) {
    JobConfig c;
    c.path = path_;
    if (!root.IsDefined() || root.IsNull()) {
      return r_.ErrorAtLine(1, "(document)", "the job file is empty");
    }
    if (auto s = r_.CheckMapping(root, "",
                                 {"job", "cluster", "model", "data",
                                  "training", "optimizer", "policy",
                                  "liveness", "partition", "worker",
                                  "testing"});
        !s.ok()) {
      return s;
    }
    for (auto step : {&JobParser::ParseJob, &JobParser::ParseCluster,
                       &JobParser::ParseModel, &JobParser::ParseData,
                       &JobParser::ParseTraining, &JobParser::ParseOptimizer,
                       &JobParser::ParsePolicy, &JobParser::ParseLiveness,
                       &JobParser::ParsePartition, &JobParser::ParseWorker,
                       &JobParser::ParseTesting}) {
      if (absl::Status s = (this->*step)(root, &c); !s.ok()) return s;
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
    if (absl::Status s = r_.CheckMapping(node, name, keys); !s.ok()) return s;
    return node;
  }

  absl::Status ParseJob(const YAML::Node& root, JobConfig* c) {
    auto job = Section(root, "job", true, {"id", "seed"});
    if (!job.ok()) return job.status();
    if (auto s = r_.Get(*job, "job", "id", true, &c->job_id); !s.ok()) {
      return s;
    }
    if (c->job_id.empty()) {
      return r_.Error((*job)["id"], "job.id", "must not be empty");
    }
    return r_.Get(*job, "job", "seed", false, &c->seed);
  }

  absl::Status ParseCluster(const YAML::Node& root, JobConfig* c) {
    auto cluster = Section(root, "cluster", true, {"servers", "workers"});
    if (!cluster.ok()) return cluster.status();
    const YAML::Node servers = (*cluster)["servers"];
    if (!servers.IsDefined() || servers.IsNull()) {
      return r_.MissingError(*cluster, "cluster", "cluster.servers",
                             "missing required field");
    }
    if (!servers.IsSequence() || servers.size() == 0) {
      return r_.Error(servers, "cluster.servers",
                      "expected a non-empty list of \"host:port\" addresses");
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < servers.size(); ++i) {
      const std::string field = absl::StrCat("cluster.servers[", i, "]");
      if (!servers[i].IsScalar()) {
        return r_.Error(servers[i], field, "expected \"host:port\"");
      }
      const std::string address = servers[i].Scalar();
      std::string host;
      int port = 0;
      if (absl::Status s = ParseHostPort(address, &host, &port); !s.ok()) {
        return r_.Error(servers[i], field, std::string(s.message()));
      }
      if (port != 0 && !seen.insert(address).second) {
        return r_.Error(servers[i], field,
                        absl::StrCat("address '", address, "' listed twice"));
      }
      c->servers.push_back(address);
    }
    if (auto s = r_.Get(*cluster, "cluster", "workers", true, &c->num_workers);
        !s.ok()) {
      return s;
    }
    if (c->num_workers < 1 || c->num_workers > 4096) {
      return r_.Error((*cluster)["workers"], "cluster.workers",
                      "must be between 1 and 4096");
    }
    return absl::OkStatus();
  }

  absl::Status ParseModel(const YAML::Node& root, JobConfig* c) {
    auto model = Section(root, "model", true, {"type", "layers"});
    if (!model.ok()) return model.status();
    if (auto s = r_.Get(*model, "model", "type", false, &c->model.type);
        !s.ok()) {
      return s;
    }
    if (c->model.type != "mlp") {
      return r_.Error((*model)["type"], "model.type",
                      absl::StrCat("unknown model type '", c->model.type,
                                   "' (expected: mlp)"));
    }
    const YAML::Node layers = (*model)["layers"];
    if (!layers.IsDefined() || layers.IsNull()) {
      return r_.MissingError(*model, "model", "model.layers",
                             "missing required field");
    }
    if (!layers.IsSequence() || layers.size() < 2) {
      return r_.Error(layers, "model.layers",
                      "expected a list of at least two layer widths");
    }
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::string field = absl::StrCat("model.layers[", i, "]");
      int width = 0;
      if (!layers[i].IsScalar() ||
          !absl::SimpleAtoi(layers[i].Scalar(), &width) || width < 1 ||
          width > (1 << 20)) {
        return r_.Error(layers[i], field,
                        "expected a positive integer width (at most 1048576)");
      }
      c->model.layers.push_back(width);
    }
    return absl::OkStatus();
  }

  absl::Status ParseData(const YAML::Node& root, JobConfig* c) {
    auto data =
        Section(root, "data", false,
                {"dir", "train_images", "train_labels", "test_images",
                 "test_labels", "train_limit", "test_limit"});
    if (!data.ok()) return data.status();
    std::string dir = kDefaultDataDir;
    if (auto s = r_.Get(*data, "data", "dir", false, &dir); !s.ok()) return s;
    dir = Resolve(DirName(path_), dir);
    struct File {
      const char* key;
      const char* default_name;
      std::string* out;
    };
    const File files[] = {
        {"train_images", "train-images-idx3-ubyte.gz", &c->data.train_images},
        {"train_labels", "train-labels-idx1-ubyte.gz", &c->data.train_labels},
        {"test_images", "t10k-images-idx3-ubyte.gz", &c->data.test_images},
        {"test_labels", "t10k-labels-idx1-ubyte.gz", &c->data.test_labels},
    };
    for (const File& f : files) {
      std::string name = f.default_name;
      if (auto s = r_.Get(*data, "data", f.key, false, &name); !s.ok()) {
        return s;
      }
      *f.out = Resolve(dir, name);
      std::ifstream probe(*f.out, std::ios::binary);
      if (!probe.good()) {
        // Point at the key when given, else at `data.dir` (or the section).
        const YAML::Node at = (*data)[f.key].IsDefined() ? (*data)[f.key]
                              : (*data)["dir"].IsDefined() ? (*data)["dir"]
                                                            : *data;
        return r_.Error(
            at, absl::StrCat("data.", f.key),
            absl::StrCat("cannot read '", *f.out,
                         "' (install dataset-fashion-mnist or set data.dir)"));
      }
    }
    for (auto [key, out] : {std::pair{"train_limit", &c->data.train_limit},
                            std::pair{"test_limit", &c->data.test_limit}}) {
      if (auto s = r_.Get(*data, "data", key, false, out); !s.ok()) return s;
      if (*out < 0) {
        return r_.Error((*data)[key], absl::StrCat("data.", key),
                        "must be >= 0 (0 means all samples)");
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParseTraining(const YAML::Node& root, JobConfig* c) {
    auto t = Section(root, "training", true, {"epochs", "batch_size",
                                              "shuffle"});
    if (!t.ok()) return t.status();
    TrainingConfig& tc = c->training;
    if (auto s = r_.Get(*t, "training", "epochs", true, &tc.epochs); !s.ok()) {
      return s;
    }
    if (tc.epochs < 1 || tc.epochs > 100000) {
      return r_.Error((*t)["epochs"], "training.epochs",
                      "must be between 1 and 100000");
    }
    if (auto s = r_.Get(*t, "training", "batch_size", true, &tc.batch_size);
        !s.ok()) {
      return s;
    }
    if (tc.batch_size < 1 || tc.batch_size > (1 << 20)) {
      return r_.Error((*t)["batch_size"], "training.batch_size",
                      "must be between 1 and 1048576");
    }
    return r_.Get(*t, "training", "shuffle", false, &tc.shuffle);
  }

  absl::Status ParseOptimizer(const YAML::Node& root, JobConfig* c) {
    auto o = Section(root, "optimizer", true,
                     {"type", "learning_rate", "momentum", "weight_decay",
                      "nesterov", "beta1", "beta2", "alpha", "eps",
                      "schedule"});
    if (!o.ok()) return o.status();
    OptimizerConfig& oc = c->optimizer;
    if (auto s = r_.Get(*o, "optimizer", "type", false, &oc.type); !s.ok()) {
      return s;
    }
    // The keys each optimizer takes besides type, learning_rate, schedule.
    const std::map<std::string, std::set<std::string>> keys = {
        {"sgd", {"momentum", "weight_decay", "nesterov"}},
        {"adam", {"weight_decay", "beta1", "beta2", "eps"}},
        {"adamw", {"weight_decay", "beta1", "beta2", "eps"}},
        {"rmsprop", {"momentum", "weight_decay", "alpha", "eps"}},
        {"adagrad", {"weight_decay", "eps"}},
    };
    auto allowed = keys.find(oc.type);
    if (allowed == keys.end()) {
      return r_.Error((*o)["type"], "optimizer.type",
                      absl::StrCat("unknown optimizer '", oc.type,
                                   "' (expected: sgd, adam, adamw, rmsprop or "
                                   "adagrad)"));
    }
    for (auto it = o->begin(); it != o->end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == "type" || key == "learning_rate" || key == "schedule") continue;
      if (allowed->second.count(key) == 0) {
        return r_.Error(it->first, absl::StrCat("optimizer.", key),
                        absl::StrCat("does not apply to optimizer.type ",
                                     oc.type));
      }
    }
    oc.eps = oc.type == "adagrad" ? 1e-10 : 1e-8;
    struct Number {
      const char* key;
      double* out;
      double lo, hi;  // lo < value < hi, or lo <= value when lo_inclusive
      bool lo_inclusive;
      const char* range;
    };
    const Number numbers[] = {
        {"learning_rate", &oc.learning_rate, 0, 1e9, false, "must be > 0"},
        {"momentum", &oc.momentum, 0, 1, true, "must be in [0, 1)"},
        {"weight_decay", &oc.weight_decay, 0, 1e9, true, "must be >= 0"},
        {"beta1", &oc.beta1, 0, 1, true, "must be in [0, 1)"},
        {"beta2", &oc.beta2, 0, 1, true, "must be in [0, 1)"},
        {"alpha", &oc.alpha, 0, 1, true, "must be in [0, 1)"},
        {"eps", &oc.eps, 0, 1, false, "must be in (0, 1)"},
    };
    for (const Number& n : numbers) {
      const bool required = std::string(n.key) == "learning_rate";
      if (auto s = r_.Get(*o, "optimizer", n.key, required, n.out); !s.ok()) {
        return s;
      }
      const double v = *n.out;
      if (!(n.lo_inclusive ? v >= n.lo : v > n.lo) || !(v < n.hi)) {
        return r_.Error((*o)[n.key], absl::StrCat("optimizer.", n.key),
                        n.range);
      }
    }
    if (auto s = r_.Get(*o, "optimizer", "nesterov", false, &oc.nesterov);
        !s.ok()) {
      return s;
    }
    if (oc.nesterov && oc.momentum == 0) {
      return r_.Error((*o)["nesterov"], "optimizer.nesterov",
                      "needs optimizer.momentum > 0");
    }
    return ParseSchedule(*o, &oc);
  }

  absl::Status ParseSchedule(const YAML::Node& optimizer, OptimizerConfig* oc) {
    const YAML::Node node = optimizer["schedule"];
    if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
    if (auto s = r_.CheckMapping(node, "optimizer.schedule",
                                 {"type", "warmup_steps", "step_size", "gamma",
                                  "total_steps", "min_lr"});
        !s.ok()) {
      return s;
    }
    ScheduleConfig& sc = oc->schedule;
    const std::string f = "optimizer.schedule";
    std::string type = "constant";
    if (auto s = r_.Get(node, f, "type", false, &type); !s.ok()) return s;
    if (type == "constant") {
      sc.type = ScheduleType::kConstant;
    } else if (type == "step") {
      sc.type = ScheduleType::kStep;
    } else if (type == "cosine") {
      sc.type = ScheduleType::kCosine;
    } else {
      return r_.Error(node["type"], f + ".type",
                      absl::StrCat("unknown schedule '", type,
                                   "' (expected: constant, step or cosine)"));
    }
    for (auto [key, out] : {std::pair{"warmup_steps", &sc.warmup_steps},
                            std::pair{"step_size", &sc.step_size},
                            std::pair{"total_steps", &sc.total_steps}}) {
      if (auto s = r_.Get(node, f, key, false, out); !s.ok()) return s;
      if (*out < 0) return r_.Error(node[key], f + "." + key, "must be >= 0");
    }
    for (auto [key, out] : {std::pair{"gamma", &sc.gamma},
                            std::pair{"min_lr", &sc.min_lr}}) {
      if (auto s = r_.Get(node, f, key, false, out); !s.ok()) return s;
    }
    if (sc.type == ScheduleType::kStep) {
      if (sc.step_size < 1) {
        return r_.Error(node["step_size"].IsDefined() ? node["step_size"] : node,
                        f + ".step_size", "must be >= 1 for a step schedule");
      }
      if (!(sc.gamma > 0 && sc.gamma <= 1)) {
        return r_.Error(node["gamma"], f + ".gamma", "must be in (0, 1]");
      }
    }
    if (sc.type == ScheduleType::kCosine) {
      if (sc.total_steps <= sc.warmup_steps) {
        return r_.Error(
            node["total_steps"].IsDefined() ? node["total_steps"] : node,
            f + ".total_steps",
            "a cosine schedule needs total_steps > warmup_steps");
      }
      if (!(sc.min_lr >= 0 && sc.min_lr <= oc->learning_rate)) {
        return r_.Error(node["min_lr"], f + ".min_lr",
                        "must be in [0, optimizer.learning_rate]");
      }
    }
    return absl::OkStatus();
  }

  absl::Status ParsePolicy(const YAML::Node& root, JobConfig* c) {
    auto p = Section(root, "policy", true, {"type", "staleness"});
    if (!p.ok()) return p.status();
    std::string type;
    if (auto s = r_.Get(*p, "policy", "type", true, &type); !s.ok()) return s;
    if (type == "sync") {
      c->policy.type = PolicyType::kSync;
    } else if (type == "async") {
      c->policy.type = PolicyType::kAsync;
    } else if (type == "ssp") {
      c->policy.type = PolicyType::kSsp;
    } else {
      return r_.Error((*p)["type"], "policy.type",
                      absl::StrCat("unknown policy '", type,
                                   "' (expected: sync, async or ssp)"));
    }
    const bool has_staleness = (*p)["staleness"].IsDefined();
    if (c->policy.type == PolicyType::kSsp) {
      if (auto s = r_.Get(*p, "policy", "staleness", true,
                          &c->policy.staleness);
          !s.ok()) {
        return s;
      }
      if (c->policy.staleness < 0 || c->policy.staleness > 1000000) {
        return r_.Error((*p)["staleness"], "policy.staleness",
                        "must be between 0 and 1000000");
      }
    } else if (has_staleness) {
      return r_.Error((*p)["staleness"], "policy.staleness",
                      "only applies to policy.type ssp");
    }
    return absl::OkStatus();
  }

  absl::Status ParseLiveness(const YAML::Node& root, JobConfig* c) {
    auto l = Section(root, "liveness", false,
                     {"lease_seconds", "heartbeat_seconds",
                      "warn_after_seconds"});
    if (!l.ok()) return l.status();
    LivenessConfig& lc = c->liveness;
    for (auto [key, out] : {std::pair{"lease_seconds", &lc.lease_seconds},
                            std::pair{"heartbeat_seconds", &lc.heartbeat_seconds},
                            std::pair{"warn_after_seconds",
                                      &lc.warn_after_seconds}}) {
      if (auto s = r_.Get(*l, "liveness", key, false, out); !s.ok()) return s;
      if (!(*out > 0) || *out > 86400) {
        return r_.Error((*l)[key], absl::StrCat("liveness.", key),
                        "must be > 0 and at most 86400 seconds");
      }
    }
    if (lc.heartbeat_seconds * 2 > lc.lease_seconds) {
      const YAML::Node at = (*l)["heartbeat_seconds"].IsDefined()
                                ? (*l)["heartbeat_seconds"]
                                : (*l)["lease_seconds"];
      return r_.Error(at, "liveness.heartbeat_seconds",
                      "must be at most half of liveness.lease_seconds, or "
                      "live workers would lose their lease");
    }
    return absl::OkStatus();
  }

  absl::Status ParseTesting(const YAML::Node& root, JobConfig* c) {
    auto t = Section(root, "testing", false, {"slow_rank", "slow_step_ms"});
    if (!t.ok()) return t.status();
    if (auto s = r_.Get(*t, "testing", "slow_rank", false, &c->testing.slow_rank);
        !s.ok()) {
      return s;
    }
    if (c->testing.slow_rank < -1 || c->testing.slow_rank >= c->num_workers) {
      return r_.Error((*t)["slow_rank"], "testing.slow_rank",
                      absl::StrCat("must be a rank in [0, ", c->num_workers,
                                   ") or -1 for none"));
    }
    if (auto s = r_.Get(*t, "testing", "slow_step_ms", false,
                        &c->testing.slow_step_ms);
        !s.ok()) {
      return s;
    }
    if (c->testing.slow_step_ms < 0 || c->testing.slow_step_ms > 60000) {
      return r_.Error((*t)["slow_step_ms"], "testing.slow_step_ms",
                      "must be between 0 and 60000");
    }
    return absl::OkStatus();
  }

  absl::Status ParsePartition(const YAML::Node& root, JobConfig* c) {
    auto p = Section(root, "partition", false, {"chunk_bytes"});
    if (!p.ok()) return p.status();
    if (auto s = r_.Get(*p, "partition", "chunk_bytes", false,
                        &c->chunk_bytes);
        !s.ok()) {
      return s;
    }
    if (c->chunk_bytes < 4 || c->chunk_bytes > (int64_t{1} << 30) ||
        c->chunk_bytes % 4 != 0) {
      return r_.Error((*p)["chunk_bytes"], "partition.chunk_bytes",
                      "must be a multiple of 4 between 4 and 1073741824");
    }
    return absl::OkStatus();
  }

  absl::Status ParseWorker(const YAML::Node& root, JobConfig* c) {
    auto w = Section(root, "worker", false,
                     {"device", "threads", "blas_core", "allow_tf32"});
    if (!w.ok()) return w.status();
    if (auto s = r_.Get(*w, "worker", "device", false, &c->worker.device);
        !s.ok()) {
      return s;
    }
    if (c->worker.device != "auto" && c->worker.device != "cpu" &&
        c->worker.device != "cuda") {
      return r_.Error((*w)["device"], "worker.device",
                      absl::StrCat("unknown device '", c->worker.device,
                                   "' (expected: auto, cpu or cuda)"));
    }
    if (auto s = r_.Get(*w, "worker", "allow_tf32", false,
                        &c->worker.allow_tf32);
        !s.ok()) {
      return s;
    }
    if (auto s = r_.Get(*w, "worker", "threads", false, &c->worker.threads);
        !s.ok()) {
      return s;
    }
    if (c->worker.threads < 1 || c->worker.threads > 256) {
      return r_.Error((*w)["threads"], "worker.threads",
                      "must be between 1 and 256");
    }
    if (auto s = r_.Get(*w, "worker", "blas_core", false,
                        &c->worker.blas_core);
        !s.ok()) {
      return s;
    }
    for (char ch : c->worker.blas_core) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) {
        return r_.Error((*w)["blas_core"], "worker.blas_core",
                        "expected auto, library or an OpenBLAS core name "
                        "such as Haswell");
      }
    }
    return absl::OkStatus();
  }

  Reader r_;
  std::string path_;
};

}  // namespace

const char* PolicyName(PolicyType type) {
  switch (type) {
    case PolicyType::kSync:
      return "sync";
    case PolicyType::kAsync:
      return "async";
    case PolicyType::kSsp:
      return "ssp";
  }
  return "unknown";
}

absl::Status ParseHostPort(const std::string& address, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 ||
      colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected \"host:port\", got '", address, "'"));
  }
  int p = -1;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &p) || p < 0 ||
      p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port of '", address, "' must be in [0, 65535]"));
  }
  *host = address.substr(0, colon);
  *port = p;
  return absl::OkStatus();
}

absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: (syntax): %s", path, e.mark.is_null() ? 1 : e.mark.line + 1,
        e.msg));
  }
  try {
    return JobParser(path).Parse(root);
  } catch (const YAML::Exception& e) {
    // Defensive: yaml-cpp reports misuse (e.g. indexing a scalar) by
    // throwing; no exception leaves this module.
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s:%d: (structure): %s", path, e.mark.is_null() ? 1 : e.mark.line + 1,
        e.msg));
  }
}

absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(
        absl::StrCat(path, ":0: (file): cannot open the job file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobConfig(text.str(), path);
}

}  // namespace paramd
