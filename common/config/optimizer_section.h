// The job file's `optimizer` section (with its `schedule`), read into an
// OptimizerConfig. Part of the job-file parser (common/config/job_file.h).
#ifndef PARAMD_COMMON_CONFIG_OPTIMIZER_SECTION_H_
#define PARAMD_COMMON_CONFIG_OPTIMIZER_SECTION_H_

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// Reads the mapping `node` (the `optimizer` section, its keys already
// checked against every optimizer's) into `out`: the keys the chosen type
// takes, their ranges, and the schedule.
absl::Status ParseOptimizerSection(YamlReader& reader, const YAML::Node& node,
                                   OptimizerConfig* out);

// The keys the `optimizer` section may hold, across every type.
const std::set<std::string>& OptimizerSectionKeys();

// The `schedule` mapping of `optimizer` (absent: constant), named `field`
// in errors (e.g. "optimizer.schedule").
absl::Status ParseScheduleSection(YamlReader& reader,
                                  const YAML::Node& optimizer,
                                  const std::string& field,
                                  double learning_rate, ScheduleConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_OPTIMIZER_SECTION_H_
