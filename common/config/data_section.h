// The job file's `data` section: what format the data files have (IDX
// images, or click logs), where the training and test files are, how many
// samples to use, and the training batches' augmentation. Part of
// the job-file parser (common/config/job_file.h), which checks the
// section's keys before calling this.
#ifndef PARAMD_COMMON_CONFIG_DATA_SECTION_H_
#define PARAMD_COMMON_CONFIG_DATA_SECTION_H_

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/run_sections.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// Where the data files are when the job file names no data.dir: Debian's
// dataset-fashion-mnist.
inline constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";

// The largest data.augment.crop_padding (pixels on each side).
inline constexpr int kMaxCropPadding = 16;

// Parses `data` (a mapping whose keys were checked) into `out`; with
// `check_readable`, every file it names must be readable. `resolve` resolves
// data.dir against the job file's folder.
absl::Status ParseDataSection(YamlReader& reader, const YAML::Node& data,
                              const PathResolver& resolve, bool check_readable,
                              DataConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_DATA_SECTION_H_
