// `paramctl run` from tests: its command line with the binaries Bazel
// built, and the pids it reports starting.
#ifndef PARAMD_TESTS_PARAMCTL_RUNS_H_
#define PARAMD_TESTS_PARAMCTL_RUNS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace paramd::testing {

// tools/paramctl run `job` with the server and worker binaries of this
// build, then `extra`.
std::vector<std::string> ParamctlRunArgs(const std::string& job,
                                         std::vector<std::string> extra = {});

// Every pid paramctl reported starting or restarting, in order.
std::vector<pid_t> StartedPids(const std::string& output);

// The pid paramctl reported for `name` ("server 1", "backup 0") the last
// time it started it; -1 when it did not.
pid_t PidOf(const std::string& output, const std::string& name);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_PARAMCTL_RUNS_H_
