// Server addresses from the Slurm job a process runs in, for job files
// with `cluster.servers: {slurm: N}`.
//
// The rule, shared by paramd-server, paramd-worker, paramctl and the batch
// script `paramctl slurm` writes: the job's nodes are SLURM_JOB_NODELIST
// expanded in order; with N servers on M nodes, P = ceil(N / M) servers go
// on each node (srun --ntasks-per-node=P --distribution=block), so server K
// runs on node K / P and listens on port base + K, where base is
// cluster.servers.port, or when that is 0, one chosen per job from
// SLURM_JOB_ID (BasePortForJob) so that jobs sharing a node differ. With
// replication.factor 2 each shard's backup goes on the next server node
// (see BackupNode), its ports after the servers'.
#ifndef PARAMD_COMMON_LAUNCH_SLURM_H_
#define PARAMD_COMMON_LAUNCH_SLURM_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/job_config.h"

namespace paramd {

// Reads an environment variable; null when unset.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup ProcessEnv();

// Expands a Slurm host list ("n[01-03,7],gpu-a[1-2]x") into host names, in
// order, keeping zero padding. InvalidArgument naming the fault otherwise.
absl::StatusOr<std::vector<std::string>> ExpandHostList(absl::string_view list);

// 20000 + (job_id mod 2000) × 16: room for 16 servers per node per job
// before two jobs' ranges can meet, and below 65535 for 1024 servers.
int BasePortForJob(uint64_t job_id);

// Servers per node when `servers` servers share `nodes` nodes.
int ServersPerNode(int servers, int nodes);

// "host:port" of each of `config`'s servers in the Slurm job of `env`.
// FailedPrecondition when not inside a Slurm job (SLURM_JOB_ID unset).
absl::StatusOr<std::vector<std::string>> SlurmServerAddresses(
    const JobConfig& config, const EnvLookup& env);

// With replication.factor 2, shard K's backup runs on the node after its
// server's among the nodes that hold servers (BackupNode, wrapping; the
// same node when there is one) and listens on port base + N + K.
int BackupNode(int shard, int servers, int per_node);
absl::StatusOr<std::vector<std::string>> SlurmBackupAddresses(
    const JobConfig& config, const EnvLookup& env);

// For a job with servers_from_slurm: fills config->servers from `env`, and
// with replicas config->replication.backups. Does nothing for other jobs.
absl::Status ResolveSlurmServers(JobConfig* config, const EnvLookup& env);

}  // namespace paramd

#endif  // PARAMD_COMMON_LAUNCH_SLURM_H_
