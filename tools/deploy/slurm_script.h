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
// A replicated job without coordination.etcd gets a third (fourth) step: a
// single-member etcd on the job's first node, at the port after the
// servers' and backups' (base + 2N), which every process is given with
// --etcd — as `paramctl run` does on one machine.
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
  // etcd's program, as the nodes see it: a job with replication.factor 2
  // and no coordination.etcd gets an etcd of its own (one member, on the
  // job's first node) that fences its shards' replicas. Empty: the
  // replicas run without a fence, as the script then says.
  std::string etcd_binary;
};

// Whether the script of `config` (with `options`) starts an etcd of the
// job's own.
bool SlurmStartsEtcd(const JobConfig& config,
                     const SlurmScriptOptions& options);

// The script, or InvalidArgument naming what is wrong (a job whose servers
// are not {slurm: N}, a value sbatch would misread).
absl::StatusOr<std::string> SlurmBatchScript(const JobConfig& config,
                                             const SlurmScriptOptions& options);

}  // namespace paramd

#endif  // PARAMD_TOOLS_DEPLOY_SLURM_SCRIPT_H_
