#include "common/config/yaml_reader.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace paramd {

absl::Status YamlReader::ErrorAtLine(int line, const std::string& field,
                                     const std::string& message) const {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s: %s", file_, line,
                      field.empty() ? "(document)" : field, message));
}

absl::Status YamlReader::MissingError(const YAML::Node& parent,
                                      const std::string& parent_field,
                                      const std::string& field,
                                      const std::string& message) const {
  auto it = key_lines_.find(parent_field);
  return ErrorAtLine(it != key_lines_.end() ? it->second : LineOf(parent),
                     field, message);
}

absl::Status YamlReader::CheckMapping(const YAML::Node& node,
                                      const std::string& field,
                                      const std::set<std::string>& allowed) {
  if (!node.IsMap()) return Error(node, field, "expected a mapping");
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = it->first.Scalar();
    key_lines_[Join(field, key)] = LineOf(it->first);
    if (allowed.count(key) == 0) {
      return Error(it->first, Join(field, key),
                   absl::StrCat("unknown key (allowed here: ",
                                absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

int YamlReader::LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 1;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? 1 : mark.line + 1;
}

std::string YamlReader::KindName(const YAML::Node& node) {
  if (node.IsMap()) return "mapping";
  if (node.IsSequence()) return "sequence";
  return "scalar";
}

bool YamlReader::Convert(const std::string& s, std::string* out) {
  *out = s;
  return true;
}

bool YamlReader::Convert(const std::string& s, bool* out) {
  if (s == "true" || s == "True" || s == "yes") return *out = true, true;
  if (s == "false" || s == "False" || s == "no") return *out = false, true;
  return false;
}

bool YamlReader::Convert(const std::string& s, int64_t* out) {
  return absl::SimpleAtoi(s, out);
}

bool YamlReader::Convert(const std::string& s, uint64_t* out) {
  return absl::SimpleAtoi(s, out);
}

bool YamlReader::Convert(const std::string& s, int* out) {
  return absl::SimpleAtoi(s, out);
}

bool YamlReader::Convert(const std::string& s, double* out) {
  return absl::SimpleAtod(s, out) && std::isfinite(*out);
}

}  // namespace paramd
