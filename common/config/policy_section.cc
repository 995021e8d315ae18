#include "common/config/policy_section.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

const std::set<std::string>& PolicySectionKeys() {
  static const std::set<std::string>* keys =
      new std::set<std::string>{"type", "staleness", "staleness_scaling"};
  return *keys;
}

absl::Status ParsePolicySection(YamlReader& r, const YAML::Node& p,
                                PolicyConfig* c) {
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

}  // namespace paramd
