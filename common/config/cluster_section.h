// The job file's `cluster` section: the servers (a list of "host:port"
// addresses, or {slurm: N, port: P} for servers placed by Slurm) and the
// number of workers. Part of the job-file parser (common/config/job_file.h),
// which checks the section's keys before calling this.
#ifndef PARAMD_COMMON_CONFIG_CLUSTER_SECTION_H_
#define PARAMD_COMMON_CONFIG_CLUSTER_SECTION_H_

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// Parses `cluster` (a mapping whose keys were checked) into the job's
// servers, servers_from_slurm, slurm_port and num_workers.
absl::Status ParseClusterSection(YamlReader& reader, const YAML::Node& cluster,
                                 JobConfig* job);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_CLUSTER_SECTION_H_
