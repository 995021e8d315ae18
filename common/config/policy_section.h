// The job file's `policy` and `guard` sections — how the servers take
// pushes — read into a PolicyConfig and a GuardConfig. Part of the
// job-file parser (common/config/job_file.h).
#ifndef PARAMD_COMMON_CONFIG_POLICY_SECTION_H_
#define PARAMD_COMMON_CONFIG_POLICY_SECTION_H_

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// The keys the `policy` section may hold, across every type.
const std::set<std::string>& PolicySectionKeys();

// Reads the mapping `node` (the `policy` section, its keys already checked
// against PolicySectionKeys) into `out`: the type, and the keys that type
// takes (a key of another type is refused, naming the types it applies to).
// `job` has its cluster and model read already.
absl::Status ParsePolicySection(YamlReader& reader, const YAML::Node& node,
                                const JobConfig& job, PolicyConfig* out);

// Reads the `guard` mapping `node` (its keys already checked against
// GuardSectionKeys), which turns the guard on; absent or null: it stays
// off.
const std::set<std::string>& GuardSectionKeys();
absl::Status ParseGuardSection(YamlReader& reader, const YAML::Node& node,
                               GuardConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_POLICY_SECTION_H_
