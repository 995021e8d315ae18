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

// `job` with the model its workers declared (docs/job-file.md, "Framework
// models"): `declaration` is YAML holding `tensors`, the list a tensors
// file holds, and `optimizer`, the job file's section, exactly when the
// job file has none. Where the job declares its tensors
// (model.tensors_declared), the declared list becomes the model's; where
// it lists them, the declared list must be that list. The result keeps
// the declaration (JobConfig::declaration). A refusal names "the declared
// model", its line and field, or the first tensor that differs.
absl::StatusOr<JobConfig> WithDeclaredModel(const JobConfig& job,
                                            const std::string& declaration);

// FailedPrecondition naming the first difference, unless `declared` (a
// WithDeclaredModel result) holds the same model as `adopted` (the one
// taken first): the same tensors in order (name, shape, kind), and the
// same declared optimizer.
absl::Status SameDeclaredModel(const JobConfig& adopted,
                               const JobConfig& declared);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_JOB_FILE_H_
