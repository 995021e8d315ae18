// The job file's `optimizer` section (with its `schedule`), read into an
// OptimizerConfig. Declared in common/config/job_sections.h, called by the
// job-file parser.

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

// Every key in `o` must apply to optimizer `type` (besides type,
// learning_rate and schedule, which all take).
absl::Status CheckKeysOfType(const YamlReader& r, const YAML::Node& o,
                             const std::string& type) {
  static const auto* const kKeys =
      new std::map<std::string, std::set<std::string>>{
          {"sgd", {"momentum", "weight_decay", "nesterov"}},
          {"adam", {"weight_decay", "beta1", "beta2", "eps"}},
          {"adamw", {"weight_decay", "beta1", "beta2", "eps"}},
          {"rmsprop", {"momentum", "weight_decay", "alpha", "eps"}},
          {"adagrad", {"weight_decay", "eps"}},
      };
  auto allowed = kKeys->find(type);
  if (allowed == kKeys->end()) {
    return r.Error(o["type"], "optimizer.type",
                   absl::StrCat("unknown optimizer '", type,
                                "' (expected: sgd, adam, adamw, rmsprop or "
                                "adagrad)"));
  }
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (key == "type" || key == "learning_rate" || key == "schedule" ||
        key == "clip_norm") {
      continue;
    }
    if (allowed->second.count(key) == 0) {
      return r.Error(it->first, absl::StrCat("optimizer.", key),
                     absl::StrCat("does not apply to optimizer.type ", type));
    }
  }
  return absl::OkStatus();
}

// The numeric hyper-parameters, each within its range.
absl::Status ParseNumbers(const YamlReader& r, const YAML::Node& o,
                          OptimizerConfig* oc) {
  struct Number {
    const char* key;
    double* out;
    double lo, hi;  // lo < value < hi, or lo <= value when lo_inclusive
    bool lo_inclusive;
    const char* range;
  };
  const Number numbers[] = {
      {"learning_rate", &oc->learning_rate, 0, 1e9, false, "must be > 0"},
      {"momentum", &oc->momentum, 0, 1, true, "must be in [0, 1)"},
      {"weight_decay", &oc->weight_decay, 0, 1e9, true, "must be >= 0"},
      {"beta1", &oc->beta1, 0, 1, true, "must be in [0, 1)"},
      {"beta2", &oc->beta2, 0, 1, true, "must be in [0, 1)"},
      {"alpha", &oc->alpha, 0, 1, true, "must be in [0, 1)"},
      {"eps", &oc->eps, 0, 1, false, "must be in (0, 1)"},
  };
  for (const Number& n : numbers) {
    const bool required = std::string(n.key) == "learning_rate";
    RETURN_IF_ERROR(r.Get(o, "optimizer", n.key, required, n.out));
    const double v = *n.out;
    if (!(n.lo_inclusive ? v >= n.lo : v > n.lo) || !(v < n.hi)) {
      return r.Error(o[n.key], absl::StrCat("optimizer.", n.key), n.range);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseScheduleType(const YamlReader& r, const YAML::Node& node,
                               const std::string& f, ScheduleType* out) {
  std::string type = "constant";
  RETURN_IF_ERROR(r.Get(node, f, "type", false, &type));
  if (type == "constant") {
    *out = ScheduleType::kConstant;
  } else if (type == "step") {
    *out = ScheduleType::kStep;
  } else if (type == "cosine") {
    *out = ScheduleType::kCosine;
  } else {
    return r.Error(node["type"], absl::StrCat(f, ".type"),
                   absl::StrCat("unknown schedule '", type,
                                "' (expected: constant, step or cosine)"));
  }
  return absl::OkStatus();
}

// What the schedule's type requires of its numbers.
absl::Status CheckSchedule(const YamlReader& r, const YAML::Node& node,
                           const std::string& f, const ScheduleConfig& sc,
                           double learning_rate) {
  if (sc.type == ScheduleType::kStep) {
    if (sc.step_size < 1) {
      return r.Error(node["step_size"].IsDefined() ? node["step_size"] : node,
                     f + ".step_size", "must be >= 1 for a step schedule");
    }
    if (!(sc.gamma > 0 && sc.gamma <= 1)) {
      return r.Error(node["gamma"], f + ".gamma", "must be in (0, 1]");
    }
  }
  if (sc.type == ScheduleType::kCosine) {
    if (sc.total_steps <= sc.warmup_steps) {
      return r.Error(
          node["total_steps"].IsDefined() ? node["total_steps"] : node,
          f + ".total_steps",
          "a cosine schedule needs total_steps > warmup_steps");
    }
    if (!(sc.min_lr >= 0 && sc.min_lr <= learning_rate)) {
      return r.Error(node["min_lr"], f + ".min_lr",
                     "must be in [0, optimizer.learning_rate]");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseScheduleSection(YamlReader& r, const YAML::Node& optimizer,
                                  const std::string& f, double learning_rate,
                                  ScheduleConfig* out) {
  const YAML::Node node = optimizer["schedule"];
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckMapping(
      node, f,
      {"type", "warmup_steps", "step_size", "gamma", "total_steps", "min_lr"}));
  ScheduleConfig& sc = *out;
  RETURN_IF_ERROR(ParseScheduleType(r, node, f, &sc.type));
  for (auto [key, out] : {std::pair{"warmup_steps", &sc.warmup_steps},
                          std::pair{"step_size", &sc.step_size},
                          std::pair{"total_steps", &sc.total_steps}}) {
    RETURN_IF_ERROR(r.Get(node, f, key, false, out));
    if (*out < 0) return r.Error(node[key], f + "." + key, "must be >= 0");
  }
  for (auto [key, out] :
       {std::pair{"gamma", &sc.gamma}, std::pair{"min_lr", &sc.min_lr}}) {
    RETURN_IF_ERROR(r.Get(node, f, key, false, out));
  }
  return CheckSchedule(r, node, f, sc, learning_rate);
}

const std::set<std::string>& OptimizerSectionKeys() {
  static const auto* const kKeys = new std::set<std::string>{
      "type",  "learning_rate", "momentum", "weight_decay", "nesterov", "beta1",
      "beta2", "alpha",         "eps",      "schedule",     "clip_norm"};
  return *kKeys;
}

absl::Status ParseOptimizerSection(YamlReader& r, const YAML::Node& o,
                                   OptimizerConfig* oc) {
  RETURN_IF_ERROR(r.Get(o, "optimizer", "type", false, &oc->type));
  RETURN_IF_ERROR(CheckKeysOfType(r, o, oc->type));
  oc->eps = oc->type == "adagrad" ? 1e-10 : 1e-8;
  RETURN_IF_ERROR(ParseNumbers(r, o, oc));
  if (o["clip_norm"].IsDefined()) {
    RETURN_IF_ERROR(r.Get(o, "optimizer", "clip_norm", true, &oc->clip_norm));
    if (!(oc->clip_norm > 0 && oc->clip_norm < 1e9)) {
      return r.Error(o["clip_norm"], "optimizer.clip_norm",
                     "must be > 0 (leave it out for no clipping)");
    }
  }
  RETURN_IF_ERROR(r.Get(o, "optimizer", "nesterov", false, &oc->nesterov));
  if (oc->nesterov && oc->momentum == 0) {
    return r.Error(o["nesterov"], "optimizer.nesterov",
                   "needs optimizer.momentum > 0");
  }
  return ParseScheduleSection(r, o, "optimizer.schedule", oc->learning_rate,
                              &oc->schedule);
}

}  // namespace paramd
