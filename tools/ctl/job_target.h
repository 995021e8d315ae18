// The servers a paramctl command talks to (status, checkpoint, trace,
// export): the job file's — resolved from Slurm where the job places them
// there — or those --servers and --backups name, with the job's security
// section loaded.
#ifndef PARAMD_TOOLS_CTL_JOB_TARGET_H_
#define PARAMD_TOOLS_CTL_JOB_TARGET_H_

#include <optional>
#include <string>
#include <vector>

#include "common/base/flags.h"
#include "common/config/job_config.h"
#include "common/rpc/credentials.h"

namespace paramd {

struct Target {
  std::vector<std::string> addresses;
  // replication.factor 2: each shard's backup (the job's, or --backups).
  std::vector<std::string> backups;
  JobSecurity security;
  double heartbeat_seconds = 1;
  JobConfig config;  // The job file's, its servers resolved.
};

// --job's servers for `command`; nothing after printing why, with `*code`
// set (2: no --job, 1: the job file or the flags are wrong).
std::optional<Target> LoadTarget(const ParsedFlags& flags,
                                 const std::string& command, int* code);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_JOB_TARGET_H_
