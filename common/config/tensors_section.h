// The tensors of a model.type tensors job (docs/job-file.md, "Framework
// models"): model.tensors inline, or model.tensors_file, a YAML file of
// its own with one key `tensors` (python/paramd writes it from a model).
#ifndef PARAMD_COMMON_CONFIG_TENSORS_SECTION_H_
#define PARAMD_COMMON_CONFIG_TENSORS_SECTION_H_

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/run_sections.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// The most elements one model's tensors may hold together (2^31 − 1: the
// flat buffers are indexed by int64, the wire's chunk lengths by uint32).
constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

// Parses exactly one of model.tensors and model.tensors_file (resolved by
// `resolve`) into out->tensors. A refusal names the field (in the
// tensors file, with that file's line) and the tensor.
absl::Status ParseTensorsSection(YamlReader& reader, const YAML::Node& model,
                                 const PathResolver& resolve, ModelConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_TENSORS_SECTION_H_
