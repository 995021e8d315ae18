#define CATCH_CONFIG_RUNNER
#include "tests/skip_main.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/process_setup.h"

namespace paramd::testing {

std::string FindProgram(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs =
      absl::StrSplit(path == nullptr ? "" : path, ':', absl::SkipEmpty());
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/sbin");
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string MissingPrograms(const std::vector<std::string>& programs) {
  std::vector<std::string> missing;
  for (const std::string& p : programs) {
    if (FindProgram(p).empty()) missing.push_back(p);
  }
  if (missing.empty()) return "";
  return "needs " + absl::StrJoin(missing, ", ") +
         " (not installed; scripts/test.sh installs them)";
}

}  // namespace paramd::testing

int main(int argc, char** argv) {
  paramd::ChooseGrpcPoller();
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const std::string reason = paramd::testing::SkipReason();
  if (!reason.empty()) {
    const size_t cases = Catch::getAllTestCasesSorted(session.config()).size();
    std::printf("SKIPPED: %zu test cases: %s\n", cases, reason.c_str());
    return 0;
  }
  return session.run();
}
