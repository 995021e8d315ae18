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
    return "  bash -c 'exec \"$0\" --job \"$1\" --rank \"$SLURM_PROCID\" "
           "\"${@:2}\"' \"$WORKER\" \"$JOB\" \"${ETCD_ARGS[@]}\" &";
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
      !replicated ? " worker(s) as one Slurm job with two job steps."
      : SlurmStartsEtcd(config, o)
          ? " worker(s), a backup per server and an etcd\n# fencing them, as "
            "one Slurm job with four job steps."
          : " worker(s), and a backup per server, as one Slurm job "
            "with\n# three job steps.",
      " Submit with sbatch;\n# `scancel JOBID` stops ",
      replicated ? "every step" : "both steps",
      " (servers write a checkpoint on SIGTERM\n# when the job has "
      "checkpoint.dir). Exit status: the workers' step's.\n");
  absl::StrAppend(&s, "#SBATCH --job-name=paramd-", config.job_id, "\n");
  absl::StrAppend(&s, "#SBATCH --nodes=", nodes, "\n");
  const int backups = replicated ? servers : 0;
  const int etcd = SlurmStartsEtcd(config, o) ? 1 : 0;
  absl::StrAppend(&s, "#SBATCH --ntasks=", servers + backups + workers + etcd,
                  "\n");
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
BACKUP_HOSTS="$LOGS/paramd-$SLURM_JOB_ID-backups.hosts"
: > "$BACKUP_HOSTS"
for (( k = 0; k < SERVERS; k++ )); do
  echo "${HOSTS[$(( (k / PER + 1) % SERVER_NODES ))]}" >> "$BACKUP_HOSTS"
done
SLURM_HOSTFILE="$BACKUP_HOSTS" srun --overlap --job-name=paramd-backups \
  --ntasks=$SERVERS --distribution=arbitrary --kill-on-bad-exit=0 \
  --output="$LOGS/paramd-%j-backup-%t.log" \
  bash -c 'exec "$0" --job "$1" --shard "$SLURM_PROCID" --backup "${@:2}"' \
  "$SERVER" "$JOB" "${ETCD_ARGS[@]}" &
backups_pid=$!
)";

// The job's own etcd (SlurmStartsEtcd): a launcher written beside the logs
// (its data on the node's own disk, removed when it stops), run as a step
// on the first node; the servers start once it answers /health.
constexpr char kEtcdStep[] = R"SH(
# replication.factor 2 without coordination.etcd: an etcd of the job's own
# (one member, on the first node, at port base + 2 * SERVERS) decides which
# replica of each shard serves (docs/operations.md, "the fence").
ETCD_HOST=${HOSTS[0]}
ETCD_PORT=$(( BASE + 2 * SERVERS ))
ETCD_ARGS=(--etcd "$ETCD_HOST:$ETCD_PORT")
ETCD_LAUNCHER="$LOGS/paramd-$SLURM_JOB_ID-etcd.sh"
cat > "$ETCD_LAUNCHER" <<'LAUNCHER'
#!/bin/bash
# etcd for one Slurm job: $1 the program, $2 the client port, $3 the host.
dir="${TMPDIR:-/tmp}/paramd-etcd-$SLURM_JOB_ID"
mkdir -p "$dir" && cd "$dir" || exit 1
"$1" --name paramd --data-dir data --log-level warn   --listen-client-urls "http://0.0.0.0:$2"   --advertise-client-urls "http://$3:$2"   --listen-peer-urls unix://peer:0 --initial-advertise-peer-urls unix://peer:0   --initial-cluster paramd=unix://peer:0 &
etcd=$!
trap 'kill -TERM $etcd' TERM INT
rc=0
while kill -0 $etcd 2>/dev/null; do wait $etcd; rc=$?; done
cd / && rm -rf "$dir"
exit $rc
LAUNCHER
srun --overlap --job-name=paramd-etcd --nodes=1 --ntasks=1 \
  --nodelist="$ETCD_HOST" --kill-on-bad-exit=0 \
  --output="$LOGS/paramd-%j-etcd.log" \
  bash "$ETCD_LAUNCHER" "$ETCD" "$ETCD_PORT" "$ETCD_HOST" &
etcd_pid=$!
etcd_ready() {
  { exec 3<>"/dev/tcp/$ETCD_HOST/$ETCD_PORT"; } 2>/dev/null || return 1
  printf 'GET /health HTTP/1.0\r\nHost: %s\r\n\r\n' "$ETCD_HOST" >&3
  local reply
  reply=$(cat <&3)
  exec 3<&-
  [[ "$reply" == *'"health":"true"'* ]]
}
for (( i = 0; i < 300; i++ )); do
  etcd_ready && break
  kill -0 $etcd_pid 2>/dev/null || break
  sleep 0.2
done
if ! etcd_ready; then
  echo "paramd: the job's etcd at $ETCD_HOST:$ETCD_PORT did not start (see $LOGS/paramd-$SLURM_JOB_ID-etcd.log)"
  kill $etcd_pid 2>/dev/null
  wait
  exit 1
fi
echo "paramd: etcd at $ETCD_HOST:$ETCD_PORT fences the replicas"
)SH";

// After the servers: the job's etcd stops (and removes its data).
constexpr char kStopEtcd[] =
    R"(etcd_step=$(squeue -h -s -j "$SLURM_JOB_ID" -o '%i %j' | awk '$2 == "paramd-etcd" { print $1 }')
[[ -n "$etcd_step" ]] && scancel --signal=TERM $etcd_step
wait $etcd_pid
)";

// The shell expression of the servers' base port (common/launch/slurm.h).
std::string BasePort(const JobConfig& config) {
  if (config.slurm_port != 0) return absl::StrCat(config.slurm_port);
  return "$(( 20000 + SLURM_JOB_ID % 2000 * 16 ))";
}

}  // namespace

bool SlurmStartsEtcd(const JobConfig& config, const SlurmScriptOptions& o) {
  return config.replication.enabled() && config.coordination.etcd.empty() &&
         !o.etcd_binary.empty();
}

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
                  "WORKERS=", workers, "\n", "BASE=", BasePort(config), "\n",
                  R"(
# The placement rule of paramd-server and paramd-worker (common/launch/slurm.h):
# PER servers on each of the first nodes, server K on node K / PER at port
# base + K; both read the same node list and job id, so no address is typed.
NODES=${SLURM_JOB_NUM_NODES:-1}
PER=$(( (SERVERS + NODES - 1) / NODES ))
SERVER_NODES=$(( (SERVERS + PER - 1) / PER ))
HOSTS=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
echo "paramd: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SERVERS server(s), $PER per node"

# scancel sends SIGTERM to every step and to this script: wait for them.
trap 'echo "paramd: SIGTERM, stopping"; wait' TERM
ETCD_ARGS=()
)");
  if (SlurmStartsEtcd(config, o)) {
    absl::StrAppend(&s, "ETCD=", Quote(o.etcd_binary), "\n", kEtcdStep);
  } else if (config.replication.enabled() && config.coordination.etcd.empty()) {
    absl::StrAppend(&s,
                    "echo \"paramd: no etcd for this job (none found when "
                    "the script was written): replicas without a fence\"\n");
  }
  absl::StrAppend(&s, R"(
# A server that exits (a replaced primary: status 3) or dies does not end
# the others (--kill-on-bad-exit=0): the workers decide how the job ends.
srun --overlap --job-name=paramd-servers --nodes=$SERVER_NODES \
  --ntasks=$SERVERS --ntasks-per-node=$PER --distribution=block \
  --kill-on-bad-exit=0 \
  --output="$LOGS/paramd-%j-server-%t.log" \
  bash -c 'exec "$0" --job "$1" --shard "$SLURM_PROCID" "${@:2}"' \
  "$SERVER" "$JOB" "${ETCD_ARGS[@]}" &
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
      config.replication.enabled() ? "wait $backups_pid\n" : "",
      SlurmStartsEtcd(config, o) ? kStopEtcd : "", "exit $rc\n");
  return s;
}

}  // namespace paramd
