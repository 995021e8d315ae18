#include "common/base/flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace paramd {

std::string ParsedFlags::Get(const std::string& name,
                             const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

absl::StatusOr<int> ParsedFlags::GetInt(const std::string& name,
                                        int fallback) const {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, ": expected an integer, got '", it->second, "'"));
  }
  return value;
}

absl::StatusOr<ParsedFlags> ParseFlags(int argc, char** argv,
                                       const std::set<std::string>& valued,
                                       const std::set<std::string>& switches) {
  ParsedFlags out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      out.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (switches.count(name)) {
      if (has_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " takes no value"));
      }
      out.values[name] = "true";
    } else if (valued.count(name)) {
      if (!has_value) {
        if (i + 1 >= argc) {
          return absl::InvalidArgumentError(
              absl::StrCat("--", name, " needs a value"));
        }
        value = argv[++i];
      }
      out.values[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return out;
}

}  // namespace paramd
