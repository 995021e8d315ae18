// The batch script of `paramctl slurm`: a job's servers and workers as one
// Slurm job with two job steps.
//
// Why one job with steps rather than a heterogeneous job: steps work on
// every Slurm site and on a single node (a heterogeneous job needs a node
// entry per component and is disabled on some sites), both steps share one
// allocation and one job id (so `scancel ID` stops everything and the
// server addresses, derived from the job's node list and id, are the same
// for every process), and `srun --overlap` lets the servers and the workers
// share nodes and cores. The servers' placement follows common/launch/slurm.h.
#ifndef PARAMD_TOOLS_DEPLOY_SLURM_SCRIPT_H_
#define PARAMD_TOOLS_DEPLOY_SLURM_SCRIPT_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

struct SlurmScriptOptions {
  std::string job_path;       // Absolute path of the job file.
  std::string server_binary;  // Absolute paths, as the nodes see them.
  std::string worker_binary;
  // The paramd Python package's folder, first on a worker.command's
  // PYTHONPATH; empty: none.
  std::string python_path;
  std::string log_dir;    // Where each process's log goes.
  int nodes = 0;          // 0: as many as the larger of servers, workers.
  std::string partition;  // Empty: the cluster's default.
  std::string time;       // --time; empty: the partition's default.
  int gpus_per_worker = 0;
};

// The script, or InvalidArgument naming what is wrong (a job whose servers
// are not {slurm: N}, a value sbatch would misread).
absl::StatusOr<std::string> SlurmBatchScript(const JobConfig& config,
                                             const SlurmScriptOptions& options);

}  // namespace paramd

#endif  // PARAMD_TOOLS_DEPLOY_SLURM_SCRIPT_H_
