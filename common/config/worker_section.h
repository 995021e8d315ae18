// The job file's `worker` section: the compute device and BLAS settings, a
// framework's worker command, the overlapped exchange and same-host shared
// memory. Part of the job-file parser (common/config/job_file.h), which
// checks the section's keys before calling this.
#ifndef PARAMD_COMMON_CONFIG_WORKER_SECTION_H_
#define PARAMD_COMMON_CONFIG_WORKER_SECTION_H_

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// Parses `worker` (a mapping whose keys were checked) into `out`. `job`
// has its model, policy and compression read already: worker.overlap is
// refused with embeddings, backup workers and top-k.
absl::Status ParseWorkerSection(YamlReader& reader, const YAML::Node& worker,
                                const JobConfig& job, WorkerConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_WORKER_SECTION_H_
