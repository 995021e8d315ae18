// A small command-line parser for paramd's binaries: "--name value" or
// "--name=value" for declared flags, positional arguments kept in order.
// Unknown flags and missing values are errors naming the flag.
#ifndef PARAMD_COMMON_BASE_FLAGS_H_
#define PARAMD_COMMON_BASE_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paramd {

struct ParsedFlags {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback) const;
  // The flag as an integer; an error names the flag when it is not one.
  absl::StatusOr<int> GetInt(const std::string& name, int fallback) const;
};

// `valued` flags take a value; `switches` take none (their value is "true").
absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv,
                                       const std::set<std::string>& valued,
                                       const std::set<std::string>& switches);

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_FLAGS_H_
