// The start-up paramd-server and paramd-worker share: process settings,
// flags (with the required ones), logging, and the job file.
#ifndef PARAMD_COMMON_DAEMON_START_H_
#define PARAMD_COMMON_DAEMON_START_H_

#include <optional>
#include <set>
#include <string>

#include "common/flags.h"
#include "common/job_config.h"

namespace paramd {

struct DaemonSpec {
  const char* program;  // e.g. "paramd-server"
  const char* usage;    // printed after a usage error
  const char* id_flag;  // the required integer flag: "shard" or "rank"
  // Valued flags besides job, log_level and `id_flag`.
  std::set<std::string> flags;
  // Flags without a value.
  std::set<std::string> switches = {};
};

struct DaemonStart {
  ParsedFlags flags;
  JobConfig config;
  int id = -1;  // The value of --<id_flag>.
};

// Calls SetUpProcess, parses the flags (--job and --<id_flag> required),
// sets up logging (--log_level) and loads the job file. On failure prints
// the reason to stderr, sets `*exit_code` (2: usage, 1: the job file) and
// returns nothing.
std::optional<DaemonStart> StartDaemon(const DaemonSpec& spec, int argc,
                                       char** argv, int* exit_code);

}  // namespace paramd

#endif  // PARAMD_COMMON_DAEMON_START_H_
