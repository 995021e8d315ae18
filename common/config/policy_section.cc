// The job file's `policy` and `guard` sections — how the servers take pushes
// — read into a PolicyConfig and a GuardConfig. Declared in
// common/config/job_sections.h, called by the job-file parser.

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {

const std::set<std::string>& PolicySectionKeys() {
  static const std::set<std::string>* keys = new std::set<std::string>{
      "type", "staleness", "staleness_scaling", "backup_workers"};
  return *keys;
}

absl::Status ParsePolicySection(YamlReader& r, const YAML::Node& p,
                                const JobConfig& job, PolicyConfig* c) {
  std::string type;
  RETURN_IF_ERROR(r.Get(p, "policy", "type", true, &type));
  if (type == "sync") {
    c->type = PolicyType::kSync;
  } else if (type == "async") {
    c->type = PolicyType::kAsync;
  } else if (type == "ssp") {
    c->type = PolicyType::kSsp;
  } else {
    return r.Error(p["type"], "policy.type",
                   absl::StrCat("unknown policy '", type,
                                "' (expected: sync, async or ssp)"));
  }
  if (c->type == PolicyType::kSsp) {
    RETURN_IF_ERROR(r.Get(p, "policy", "staleness", true, &c->staleness));
    if (c->staleness < 0 || c->staleness > 1000000) {
      return r.Error(p["staleness"], "policy.staleness",
                     "must be between 0 and 1000000");
    }
  } else if (p["staleness"].IsDefined()) {
    return r.Error(p["staleness"], "policy.staleness",
                   "only applies to policy.type ssp");
  }
  if (p["backup_workers"].IsDefined()) {
    if (c->type != PolicyType::kSync) {
      return r.Error(p["backup_workers"], "policy.backup_workers",
                     "only applies to policy.type sync");
    }
    RETURN_IF_ERROR(
        r.Get(p, "policy", "backup_workers", true, &c->backup_workers));
    if (c->backup_workers < 0 || c->backup_workers >= job.num_workers) {
      return r.Error(
          p["backup_workers"], "policy.backup_workers",
          absl::StrCat("must be in [0, ", job.num_workers,
                       ") (cluster.workers is ", job.num_workers, ")"));
    }
    if (c->backup_workers > 0 && job.model.type == ModelType::kTensors) {
      return r.Error(p["backup_workers"], "policy.backup_workers",
                     "framework workers (model.type tensors) do not yet skip "
                     "ahead past rounds that closed without them");
    }
  }
  if (p["staleness_scaling"].IsDefined()) {
    if (c->type == PolicyType::kSync) {
      return r.Error(p["staleness_scaling"], "policy.staleness_scaling",
                     "only applies to policy.type async or ssp (under sync "
                     "every gradient is fresh)");
    }
    std::string scaling;
    RETURN_IF_ERROR(r.Get(p, "policy", "staleness_scaling", true, &scaling));
    if (scaling == "none") {
      c->staleness_scaling = StalenessScaling::kNone;
    } else if (scaling == "inverse") {
      c->staleness_scaling = StalenessScaling::kInverse;
    } else {
      return r.Error(p["staleness_scaling"], "policy.staleness_scaling",
                     absl::StrCat("unknown scaling '", scaling,
                                  "' (expected: none or inverse)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTablePolicies(YamlReader& r, const YAML::Node& tables,
                                const PolicyConfig& policy,
                                const ModelConfig& model) {
  const std::string job = PolicyName(policy.type);
  for (size_t i = 0; i < model.embeddings.size(); ++i) {
    const std::string& own = model.embeddings[i].policy;
    if (own.empty() || own == "async" || own == job) continue;
    return r.Error(tables[i]["policy"],
                   absl::StrCat("model.embeddings[", i, "].policy"),
                   absl::StrCat("a table may be async or follow the job's "
                                "policy.type (",
                                job, "); '", own,
                                "' would need rounds or bounds the job "
                                "does not keep"));
  }
  return absl::OkStatus();
}

const std::set<std::string>& GuardSectionKeys() {
  static const std::set<std::string>* keys =
      new std::set<std::string>{"loss_spike", "warmup_pushes", "on_diverge"};
  return *keys;
}

absl::Status ParseGuardSection(YamlReader& r, const YAML::Node& g,
                               GuardConfig* c) {
  if (!g.IsDefined() || g.IsNull()) return absl::OkStatus();
  c->enabled = true;
  RETURN_IF_ERROR(r.Get(g, "guard", "loss_spike", false, &c->loss_spike));
  if (!(c->loss_spike > 1 && c->loss_spike < 1e9)) {
    return r.Error(g["loss_spike"], "guard.loss_spike",
                   "must be > 1 (a multiple of the rank's mean loss)");
  }
  RETURN_IF_ERROR(r.Get(g, "guard", "warmup_pushes", false, &c->warmup_pushes));
  if (c->warmup_pushes < 1 || c->warmup_pushes > 1000000) {
    return r.Error(g["warmup_pushes"], "guard.warmup_pushes",
                   "must be between 1 and 1000000");
  }
  std::string action = "warn";
  RETURN_IF_ERROR(r.Get(g, "guard", "on_diverge", false, &action));
  if (action == "warn") {
    c->on_diverge = OnDiverge::kWarn;
  } else if (action == "stop") {
    c->on_diverge = OnDiverge::kStop;
  } else if (action == "skip_push") {
    c->on_diverge = OnDiverge::kSkipPush;
  } else {
    return r.Error(g["on_diverge"], "guard.on_diverge",
                   absl::StrCat("unknown action '", action,
                                "' (expected: warn, skip_push or stop)"));
  }
  return absl::OkStatus();
}

}  // namespace paramd
