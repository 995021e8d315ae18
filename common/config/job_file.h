// The job file: one YAML document read into one typed, validated JobConfig
// (common/config/job_config.h).
//
// This is the only place in paramd that parses YAML. Every error names the
// file, the line and the dotted field, as "FILE:LINE: FIELD: what is wrong",
// and unknown keys are errors. docs/job-file.md documents every key.
#ifndef PARAMD_COMMON_CONFIG_JOB_FILE_H_
#define PARAMD_COMMON_CONFIG_JOB_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

// What loading a job file checks beyond its text and its values.
struct JobFileChecks {
  // That every data file the job names can be opened for reading here. A
  // program that uses only the job's model (cuda_bench, cuda_layers_test:
  // the GPU bundle, on a machine without the dataset) turns it off; the
  // paths are still resolved and set.
  bool data_files_readable = true;
};

// Reads and validates the job file at `path`, including (by default) that
// every data file it names can be opened for reading. On failure the status
// message is one line naming file, line and field.
absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path,
                                        const JobFileChecks& checks = {});

// As LoadJobConfig, for YAML text already in memory. `path` is used in
// messages and to resolve relative data paths.
absl::StatusOr<JobConfig> ParseJobConfig(const std::string& yaml_text,
                                         const std::string& path,
                                         const JobFileChecks& checks = {});

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_JOB_FILE_H_
