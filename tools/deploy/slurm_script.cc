#include "tools/deploy/slurm_script.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace paramd {
namespace {

// Single-quoted for bash.
std::string Quote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// The command each worker task runs: paramd-worker, or the job's
// worker.command in the job file's folder with PARAMD_JOB set (rank and
// servers come from Slurm: SLURM_PROCID, cluster.servers {slurm: N}).
std::string WorkerStep(const JobConfig& config, const SlurmScriptOptions& o) {
  if (config.worker.command.empty()) {
    return "  bash -c 'exec \"$0\" --job \"$1\" --rank \"$SLURM_PROCID\"' "
           "\"$WORKER\" \"$JOB\" &";
  }
  std::string command;
  for (const std::string& word : config.worker.command) {
    absl::StrAppend(&command, " ", Quote(word));
  }
  return absl::StrCat(
      "  env PARAMD_JOB=\"$JOB\"",
      o.python_path.empty() ? ""
                            : absl::StrCat(" PYTHONPATH=", Quote(o.python_path),
                                           "${PYTHONPATH:+:$PYTHONPATH}"),
      " bash -c 'cd \"$(dirname \"$PARAMD_JOB\")\" && exec \"$@\"' worker",
      command, " &");
}

// Values that go on #SBATCH lines, which sbatch does not unquote.
absl::Status CheckDirectiveValue(const char* flag, const std::string& value) {
  for (char c : value) {
    if (absl::ascii_isspace(c) || c == '\'' || c == '"' || c == '#' ||
        c == '\\') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " '", value, "': no spaces, quotes or '#' allowed"));
    }
  }
  return absl::OkStatus();
}

// The job and the options, checked: servers from Slurm, directive values
// sbatch can read.
absl::Status CheckSlurmJob(const JobConfig& config,
                           const SlurmScriptOptions& o) {
  if (!config.servers_from_slurm) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.path,
        ": cluster.servers lists addresses; under Slurm it must say "
        "{slurm: N} so that addresses come from the job's nodes"));
  }
  for (const auto& [flag, value] :
       {std::pair{"partition", &o.partition}, std::pair{"time", &o.time}}) {
    if (absl::Status s = CheckDirectiveValue(flag, *value); !s.ok()) return s;
  }
  for (const std::string* path : {&o.job_path, &o.log_dir}) {
    if (absl::Status s = CheckDirectiveValue("job or --logs path", *path);
        !s.ok()) {
      return s;
    }
  }
  if (o.gpus_per_worker < 0 || o.nodes < 0) {
    return absl::InvalidArgumentError(
        "--nodes and --gpus-per-worker must not be negative");
  }
  return absl::OkStatus();
}

// The script's opening comment and #SBATCH directives.
std::string BatchHeader(const JobConfig& config, const SlurmScriptOptions& o) {
  const int servers = config.num_shards();
  const int workers = config.num_workers;
  const int nodes = o.nodes > 0 ? o.nodes : std::max(servers, workers);
  const bool replicated = config.replication.enabled();
  std::string s = absl::StrCat(
      "#!/bin/bash\n"
      "# Written by `paramctl slurm` for job '",
      config.job_id, "' (", config.path, "):\n# ", servers, " server(s) and ",
      workers,
      replicated ? " worker(s), and a backup per server, as one Slurm job "
                   "with\n# three job steps."
                 : " worker(s) as one Slurm job with two job steps.",
      " Submit with sbatch;\n# `scancel JOBID` stops ",
      replicated ? "every step" : "both steps",
      " (servers write a checkpoint on SIGTERM\n# when the job has "
      "checkpoint.dir). Exit status: the workers' step's.\n");
  absl::StrAppend(&s, "#SBATCH --job-name=paramd-", config.job_id, "\n");
  absl::StrAppend(&s, "#SBATCH --nodes=", nodes, "\n");
  const int backups = replicated ? servers : 0;
  absl::StrAppend(&s, "#SBATCH --ntasks=", servers + backups + workers, "\n");
  absl::StrAppend(&s, "#SBATCH --output=", o.log_dir, "/paramd-%j-batch.log\n");
  if (!o.partition.empty()) {
    absl::StrAppend(&s, "#SBATCH --partition=", o.partition, "\n");
  }
  if (!o.time.empty()) absl::StrAppend(&s, "#SBATCH --time=", o.time, "\n");
  if (o.gpus_per_worker > 0) {
    absl::StrAppend(&s, "#SBATCH --gpus=", o.gpus_per_worker * workers, "\n");
  }
  return s;
}

// replication.factor 2: the backups' step, beside the servers'.
constexpr char kBackupStep[] = R"(
# replication.factor 2: shard K's backup on the next server node (node
# (K / PER + 1) mod SERVER_NODES, the same one when there is one) at port
# base + SERVERS + K, as the rule says; one task per line of a host file.
HOSTS=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
BACKUP_HOSTS="$LOGS/paramd-$SLURM_JOB_ID-backups.hosts"
: > "$BACKUP_HOSTS"
for (( k = 0; k < SERVERS; k++ )); do
  echo "${HOSTS[$(( (k / PER + 1) % SERVER_NODES ))]}" >> "$BACKUP_HOSTS"
done
SLURM_HOSTFILE="$BACKUP_HOSTS" srun --overlap --job-name=paramd-backups \
  --ntasks=$SERVERS --distribution=arbitrary --kill-on-bad-exit=0 \
  --output="$LOGS/paramd-%j-backup-%t.log" \
  bash -c 'exec "$0" --job "$1" --shard "$SLURM_PROCID" --backup' "$SERVER" "$JOB" &
backups_pid=$!
)";

}  // namespace

absl::StatusOr<std::string> SlurmBatchScript(const JobConfig& config,
                                             const SlurmScriptOptions& o) {
  if (absl::Status s = CheckSlurmJob(config, o); !s.ok()) return s;
  const int servers = config.num_shards();
  const int workers = config.num_workers;
  std::string s = BatchHeader(config, o);
  absl::StrAppend(&s, "set -uo pipefail\n\n", "JOB=", Quote(o.job_path), "\n",
                  "SERVER=", Quote(o.server_binary), "\n",
                  "WORKER=", Quote(o.worker_binary), "\n",
                  "LOGS=", Quote(o.log_dir), "\n", "SERVERS=", servers, "\n",
                  "WORKERS=", workers, "\n",
                  R"(
# The placement rule of paramd-server and paramd-worker (common/launch/slurm.h):
# PER servers on each of the first nodes, server K on node K / PER at port
# base + K; both read the same node list and job id, so no address is typed.
NODES=${SLURM_JOB_NUM_NODES:-1}
PER=$(( (SERVERS + NODES - 1) / NODES ))
SERVER_NODES=$(( (SERVERS + PER - 1) / PER ))
echo "paramd: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SERVERS server(s), $PER per node"

# scancel sends SIGTERM to both steps and to this script: wait for them.
trap 'echo "paramd: SIGTERM, stopping"; wait' TERM

# A server that exits (a replaced primary: status 3) or dies does not end
# the others (--kill-on-bad-exit=0): the workers decide how the job ends.
srun --overlap --job-name=paramd-servers --nodes=$SERVER_NODES \
  --ntasks=$SERVERS --ntasks-per-node=$PER --distribution=block \
  --kill-on-bad-exit=0 \
  --output="$LOGS/paramd-%j-server-%t.log" \
  bash -c 'exec "$0" --job "$1" --shard "$SLURM_PROCID"' "$SERVER" "$JOB" &
servers_pid=$!
)");
  if (config.replication.enabled()) {
    absl::StrAppend(&s, kBackupStep);
  }
  absl::StrAppend(
      &s, "srun --overlap --job-name=paramd-workers --ntasks=$WORKERS \\\n",
      o.gpus_per_worker > 0
          ? absl::StrCat("  --gpus-per-task=", o.gpus_per_worker, " \\\n")
          : "",
      R"(  --output="$LOGS/paramd-%j-worker-%t.log" \
)",
      WorkerStep(config, o), R"(
workers_pid=$!

wait $workers_pid
rc=$?
echo "paramd: workers ended with status $rc; stopping the servers"
# SIGTERM to the servers' step (and the backups'): each writes a
# checkpoint (with checkpoint.dir) and exits.
steps=$(squeue -h -s -j "$SLURM_JOB_ID" -o '%i %j' | awk '$2 == "paramd-servers" || $2 == "paramd-backups" { print $1 }')
[[ -n "$steps" ]] && scancel --signal=TERM $steps
wait $servers_pid
)",
      config.replication.enabled() ? "wait $backups_pid\n" : "", "exit $rc\n");
  return s;
}

}  // namespace paramd
