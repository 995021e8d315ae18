#!/usr/bin/env bash
# paramd under a real Slurm across simulated hosts (scripts/hosts.sh):
# slurmctld on host 0 and a slurmd on each of hosts 1..N (default 3), all
# from Debian's slurm-wlm, with one munged (and its key) on the machine —
# its socket is a file every host reaches. Each host resolves the others'
# names (pd<SET>h<K>) by its own /etc/hosts. `paramctl slurm` writes the
# batch script for the main job with `servers: {slurm: 2}` and N workers
# on N nodes (EPOCHS epochs, default 2) and `sbatch --wait` runs it from
# host 0; prints where the workers found their servers (each worker's log
# says which servers are on another host), every rank's last epoch, and
# sbatch's exit status, which is the script's. Needs root; builds what it
# runs; everything it started ends with it.
#
#   scripts/cross-host-slurm.sh [N] [EPOCHS]
#
# With PARAMD_BIN=DIR it builds nothing and takes server/paramd-server,
# worker/paramd-worker and tools/paramctl under DIR (a test's runfiles).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/slurm-common.sh

nodes=${1:-3}
epochs=${2:-2}
[[ $(id -u) == 0 ]] || {
  echo "cross-host-slurm.sh: needs root (network namespaces)" >&2
  exit 1
}
export PATH="$PATH:/usr/sbin"
for p in munged slurmctld slurmd sbatch sinfo; do
  command -v "$p" >/dev/null || {
    echo "cross-host-slurm.sh: $p is missing (Debian: slurm-wlm, munge)" >&2
    exit 1
  }
done
if [[ -n "${PARAMD_BIN:-}" ]]; then
  bin=$(cd "$PARAMD_BIN" && pwd)
else
  bazel build --noshow_progress //server:paramd-server \
    //worker:paramd-worker //tools:paramctl
  bin=$PWD/bazel-bin
fi
set_name=s$(($$ % 100000))
work=$(mktemp -d "${TMPDIR:-/tmp}/cross-host-slurm.XXXXXX")
# munged's socket and the slurmds' spools: a short path under /run.
run_dir=$(mktemp -d /run/paramd-slurm.XXXXXX)
chmod 0755 "$run_dir"
cleanup() {
  scripts/hosts.sh down "$set_name" >/dev/null 2>&1 || true
  # munged gone first: it writes into its folder as it exits.
  if [[ -f "$run_dir/munge/munged.pid" ]]; then
    stop_daemon "$(cat "$run_dir/munge/munged.pid")"
  fi
  rm -rf "$run_dir"
}
trap cleanup EXIT

mapfile -t addr < <(scripts/hosts.sh up "$set_name" $((nodes + 1)) none)
name() { echo "pd${set_name}h$1"; }
on() { local k=$1; shift; scripts/hosts.sh run "$set_name" "$k" "$@"; }

# One munged, and key, for every host: its socket is a file they all
# reach.
start_munged "$run_dir"

mkdir -p "$work/state" "$work/log" "$work/job/logs"
{
  cat <<CONF
ClusterName=paramd-hosts
SlurmctldHost=$(name 0)(${addr[0]})
StateSaveLocation=$work/state
SlurmdSpoolDir=$run_dir/spool-%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd-%n.log
CONF
  slurm_conf_common "$run_dir/munge/munge.sock"
  for ((k = 1; k <= nodes; k++)); do
    echo "NodeName=$(name $k) NodeAddr=${addr[$k]} CPUs=4 State=UNKNOWN"
  done
  echo "PartitionName=hosts Nodes=$(name 1)$(
    ((nodes > 1)) && for ((k = 2; k <= nodes; k++)); do echo -n ",$(name $k)"; done
  ) Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} >"$work/slurm.conf"
export SLURM_CONF=$work/slurm.conf
# The machine's hierarchies as they are (v1 controllers beside a v2 one
# are Slurm's "hybrid" mode, which it refuses to detect): said outright.
if [[ $(stat -fc %T /sys/fs/cgroup) != cgroup2fs ]]; then
  echo "CgroupPlugin=cgroup/v1" >"$work/cgroup.conf"
fi

# The commands that mount the machine's cgroup file systems again, as
# they are mounted now, under /sys/fs/cgroup.
mount_cgroups() {
  if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
    echo "mount -t cgroup2 none /sys/fs/cgroup"
    return
  fi
  echo -n "mount -t tmpfs tmpfs /sys/fs/cgroup"
  awk '$3 == "cgroup" || $3 == "cgroup2" { print $2, $3, $4 }' /proc/mounts |
    while read -r dir type opts; do
      [[ "$dir" == /sys/fs/cgroup/* ]] || continue
      echo -n " && mkdir -p $dir && mount -t $type -o $opts none $dir"
    done
}

failed() {
  echo "cross-host-slurm.sh: $1 did not start (see $work/log):" >&2
  for f in "$work"/log/*.log; do echo "== $f"; tail -n 5 "$f"; done >&2 || true
  exit 1
}
on 0 slurmctld -f "$SLURM_CONF" || failed slurmctld
for ((k = 1; k <= nodes; k++)); do
  # `ip netns exec` gives the host a /sys of its own, without the cgroup
  # file systems slurmd reads: the machine's hierarchies mounted again
  # there, in the host's mount namespace.
  mkdir -p "$run_dir/spool-$(name $k)"
  on "$k" sh -c "$(mount_cgroups) && exec \"\$@\"" sh \
    slurmd -N "$(name $k)" -f "$SLURM_CONF" || failed "slurmd on host $k"
done
# Ready when every node is idle; bounded at 60 s.
ready=0
for _ in $(seq 600); do
  idle=$(on 0 sinfo -h -N -o '%N %T' 2>/dev/null | grep -c ' idle$' || true)
  if ((idle == nodes)); then ready=1; break; fi
  sleep 0.1
done
((ready)) || {
  echo "cross-host-slurm.sh: not every node became idle in 60 s (see $work/log)" >&2
  on 0 sinfo -N >&2 || true
  exit 1
}

sed -e 's/^\( *servers:\).*/\1 {slurm: 2}/' \
  -e "s/^\( *workers:\).*/\1 $nodes/" \
  -e "s/^\( *epochs:\).*/\1 $epochs/" configs/fashion_mnist_mlp.yaml \
  >"$work/job/job.yaml"
"$bin/tools/paramctl" slurm "$work/job/job.yaml" --nodes "$nodes" --time 20 \
  --logs "$work/job/logs" --output "$work/job/job.sbatch" \
  --server_binary "$bin/server/paramd-server" \
  --worker_binary "$bin/worker/paramd-worker"
status=0
on 0 sbatch --parsable --wait --chdir="$work/job" "$work/job/job.sbatch" \
  >"$work/sbatch.out" 2>&1 || status=$?
echo "Slurm: slurmctld on $(name 0), slurmd on $(
  for ((k = 1; k <= nodes; k++)); do echo -n "$(name $k) "; done); logs in $work"
echo "sbatch --wait: exit $status, job $(head -1 "$work/sbatch.out")"
grep -h "paramd: job" "$work"/job/logs/*batch*.log || true
grep -h "server at .* cannot map" "$work"/job/logs/*worker*.log |
  sed 's/^.* I //; s/ cannot map.*/ (another host)/' || true
grep -h "epoch $epochs/$epochs\|finished" "$work"/job/logs/*worker*.log |
  sed 's/^.* I //' || true
exit $status
