// The command line of one worker rank as paramctl starts it: paramd-worker
// with its flags, or the job's worker.command (a framework's worker, e.g.
// `/usr/bin/python3 train.py` with paramd.torch) run in the job file's
// folder through env(1), with the rank and where to find the job in its
// environment.
#ifndef PARAMD_TOOLS_CTL_WORKER_COMMAND_H_
#define PARAMD_TOOLS_CTL_WORKER_COMMAND_H_

#include <string>
#include <vector>

#include "common/config/job_config.h"

namespace paramd {

struct WorkerLaunch {
  std::string job_path;
  int rank = 0;
  std::vector<std::string> servers;  // "host:port" per shard.
  std::string launch;
  std::string log_level = "info";
  std::string worker_binary;  // paramd-worker.
  // The paramd Python package's folder (bazel-bin/python/package), put
  // first on a worker.command's PYTHONPATH; empty: none.
  std::string python_path;
  // replication.factor 2: each shard's backup (--backups); empty: none.
  std::vector<std::string> backups;
  // A local coordinator's endpoint (--etcd; paramd-worker only); empty:
  // the job file's.
  std::string etcd;
};

// argv of rank `w.rank`. For worker.command: /usr/bin/env -C <job folder>
// PARAMD_JOB=<job, absolute> PARAMD_RANK PARAMD_SERVERS (comma-separated)
// PARAMD_LAUNCH PARAMD_LOG_LEVEL [PYTHONPATH] <command...>.
std::vector<std::string> WorkerArgv(const JobConfig& config,
                                    const WorkerLaunch& w);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_WORKER_COMMAND_H_
