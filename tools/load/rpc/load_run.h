// One policy's run of paramd-load (tools/paramd_load.cc says what it
// checks and how): paramd-server processes, worker threads, the exact-sum
// check.
#ifndef PARAMD_TOOLS_LOAD_RPC_LOAD_RUN_H_
#define PARAMD_TOOLS_LOAD_RPC_LOAD_RUN_H_

#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "common/model/partitioner.h"
#include "tools/bench/server_processes.h"

namespace paramd {

struct LoadOptions {
  std::string policy;
  double seconds = 60;
  int workers = 32;
  int servers = 2;
  double drop = 0.02;
  int delay_ms = 5;
  std::vector<int> layers = {512, 128};
  std::string server_binary;
  // The servers on other hosts (--server_hosts, --server_launch); empty:
  // on 127.0.0.1.
  RemoteHosts server_hosts;
  std::string dir;  // Scratch folder for job and port files.
};

// The job file of a load run under `options.policy`.
std::string LoadJobYaml(const LoadOptions& options);

// Runs the servers and workers of `config` for options.seconds, prints the
// figures, and returns whether every check passed.
bool RunLoad(const LoadOptions& options, JobConfig config, PartitionPlan plan);

}  // namespace paramd

#endif  // PARAMD_TOOLS_LOAD_RPC_LOAD_RUN_H_
