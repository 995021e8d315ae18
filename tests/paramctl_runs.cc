#include "tests/paramctl_runs.h"

#include <regex>

namespace paramd::testing {

std::vector<std::string> ParamctlRunArgs(const std::string& job,
                                         std::vector<std::string> extra) {
  std::vector<std::string> args = {"tools/paramctl",
                                   "run",
                                   job,
                                   "--server_binary",
                                   "server/paramd-server",
                                   "--worker_binary",
                                   "worker/paramd-worker"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<pid_t> StartedPids(const std::string& output) {
  std::vector<pid_t> pids;
  static const std::regex started(R"(started \w+ \d+ \(pid (\d+)\))");
  for (std::sregex_iterator it(output.begin(), output.end(), started), end;
       it != end; ++it) {
    pids.push_back(std::stoi((*it)[1]));
  }
  return pids;
}

pid_t PidOf(const std::string& output, const std::string& name) {
  const std::regex started("(?:re)?started " + name + R"( \(pid (\d+)\))");
  pid_t pid = -1;
  for (std::sregex_iterator it(output.begin(), output.end(), started), end;
       it != end; ++it) {
    pid = std::stoi((*it)[1]);
  }
  return pid;
}

}  // namespace paramd::testing
