// YamlReader: error context for one YAML file. Turns (node, field,
// message) into the one-line "FILE:LINE: FIELD: message" form that every
// job-file error takes, checks mappings for unknown keys, and reads typed
// scalars. Used by the job-file parser (common/config/job_file.h) only.
#ifndef PARAMD_COMMON_CONFIG_YAML_READER_H_
#define PARAMD_COMMON_CONFIG_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace paramd {

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  absl::Status Error(const YAML::Node& at, const std::string& field,
                     const std::string& message) const {
    return ErrorAtLine(LineOf(at), field, message);
  }

  absl::Status ErrorAtLine(int line, const std::string& field,
                           const std::string& message) const;

  // A required `field` is absent from the mapping `parent` (named
  // `parent_field`): point at the parent's own key when it has one.
  absl::Status MissingError(const YAML::Node& parent,
                            const std::string& parent_field,
                            const std::string& field,
                            const std::string& message) const;

  // `node` must be a mapping whose keys are all in `allowed`.
  // Records the line of each key, for MissingError.
  absl::Status CheckMapping(const YAML::Node& node, const std::string& field,
                            const std::set<std::string>& allowed);

  // Reads scalar `key` of mapping `parent` into `out`. A missing key is an
  // error when `required`, and otherwise leaves `out` as it was.
  template <typename T>
  absl::Status Get(const YAML::Node& parent, const std::string& parent_field,
                   const std::string& key, bool required, T* out) const;

  static int LineOf(const YAML::Node& node);
  static std::string Join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : absl::StrCat(parent, ".", key);
  }
  static std::string KindName(const YAML::Node& node);

 private:
  template <typename T>
  static const char* TypeName() {
    if constexpr (std::is_same_v<T, bool>) return "a boolean";
    if constexpr (std::is_integral_v<T>) return "an integer";
    if constexpr (std::is_floating_point_v<T>) return "a number";
    return "a string";
  }

  static bool Convert(const std::string& s, std::string* out);
  static bool Convert(const std::string& s, bool* out);
  static bool Convert(const std::string& s, int64_t* out);
  static bool Convert(const std::string& s, uint64_t* out);
  static bool Convert(const std::string& s, int* out);
  // Finite numbers only.
  static bool Convert(const std::string& s, double* out);

  std::string file_;
  std::map<std::string, int> key_lines_;  // Dotted field → line of its key.
};

template <typename T>
absl::Status YamlReader::Get(const YAML::Node& parent,
                             const std::string& parent_field,
                             const std::string& key, bool required,
                             T* out) const {
  const std::string field = Join(parent_field, key);
  const YAML::Node node = parent[key];
  if (!node.IsDefined() || node.IsNull()) {
    if (required) {
      return MissingError(parent, parent_field, field,
                          "missing required field");
    }
    return absl::OkStatus();
  }
  if (!node.IsScalar()) {
    return Error(
        node, field,
        absl::StrCat("expected ", TypeName<T>(), ", got a ", KindName(node)));
  }
  if (!Convert(node.Scalar(), out)) {
    return Error(node, field,
                 absl::StrCat("expected ", TypeName<T>(), ", got '",
                              node.Scalar(), "'"));
  }
  return absl::OkStatus();
}

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_YAML_READER_H_
