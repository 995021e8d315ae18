// The job file's sections about running a job rather than training it:
// `limits`, `security`, `checkpoint`, `restart`, `metrics` and `compression`,
// read into their configs. Part of the job-file parser
// (common/config/job_file.h), which checks each section's keys before calling
// these.
#ifndef PARAMD_COMMON_CONFIG_RUN_SECTIONS_H_
#define PARAMD_COMMON_CONFIG_RUN_SECTIONS_H_

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// A path as written in the job file → the path to use (relative ones
// resolve against the job file's folder).
using PathResolver = std::function<std::string(const std::string&)>;

// Each reads the mapping `node` (the section; empty when absent) into
// `out`, with errors naming file, line and field.
absl::Status ParseLimitsSection(YamlReader& reader, const YAML::Node& node,
                                LimitsConfig* out);
absl::Status ParseSecuritySection(YamlReader& reader, const YAML::Node& node,
                                  const PathResolver& resolve,
                                  SecurityConfig* out);
absl::Status ParseCheckpointSection(YamlReader& reader, const YAML::Node& node,
                                    const PathResolver& resolve,
                                    CheckpointConfig* out);
// `job` has its cluster read already (backups are checked against its
// servers).
absl::Status ParseReplicationSection(YamlReader& reader, const YAML::Node& node,
                                     const JobConfig& job,
                                     ReplicationConfig* out);
absl::Status ParseRestartSection(YamlReader& reader, const YAML::Node& node,
                                 RestartConfig* out);
// `num_workers` bounds testing.slow_rank.
absl::Status ParseTestingSection(YamlReader& reader, const YAML::Node& node,
                                 int num_workers, TestingConfig* out);
absl::Status ParseCompressionSection(YamlReader& reader, const YAML::Node& node,
                                     CompressionConfig* out);
absl::Status ParseTracingSection(YamlReader& reader, const YAML::Node& node,
                                 const PathResolver& resolve,
                                 TracingConfig* out);
absl::Status ParseMetricsSection(YamlReader& reader, const YAML::Node& node,
                                 MetricsConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_RUN_SECTIONS_H_
