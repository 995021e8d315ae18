// The job file's `model` section: the MLP's layers and, for embedding_bag
// models, the embedding tables and how samples become row ids.
#ifndef PARAMD_COMMON_CONFIG_MODEL_SECTION_H_
#define PARAMD_COMMON_CONFIG_MODEL_SECTION_H_

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/run_sections.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// The largest `rows` a table may declare (ids are hashed into [0, rows)).
constexpr uint64_t kMaxTableRows = uint64_t{1} << 40;

// Parses `model` (a mapping whose keys were not checked yet) into `out`.
// `resolve` resolves model.tensors_file against the job file's folder.
absl::Status ParseModelSection(YamlReader& reader, const YAML::Node& model,
                               const PathResolver& resolve, ModelConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_MODEL_SECTION_H_
