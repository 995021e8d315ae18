#!/usr/bin/env bash
# A real single-node Slurm cluster on 127.0.0.1, for trying `paramctl slurm`
# on one machine and for the Slurm test: munged, slurmctld and slurmd from
# Debian's slurm-wlm and munge, run as root without systemd, everything
# (config, state, logs, pid files) inside DIR but the sockets, which go in
# a short folder under /run.
#
#   scripts/local-slurm.sh up DIR [CPUS]   starts it; prints the line
#                                           "export SLURM_CONF=DIR/slurm.conf"
#   scripts/local-slurm.sh down DIR        stops the daemons by their pids
#
# The node claims CPUS cpus (default 8, more than a small machine has:
# SlurmdParameters=config_overrides lets a job's servers and workers share
# the cores). Ports: two free ones, chosen at start.
set -euo pipefail
source "$(dirname "$0")/slurm-common.sh"

cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,14p' "$0" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

stop() {
  local name pid
  for name in slurmd slurmctld munged; do
    [[ -f "$dir/$name.pid" ]] || continue
    pid=$(cat "$dir/$name.pid")
    stop_daemon "$pid"
    rm -f "$dir/$name.pid"
  done
  if [[ -f "$dir/run-dir" ]]; then
    rm -rf "$(cat "$dir/run-dir")" "$dir/run-dir"
  fi
}

if [[ "$cmd" == down ]]; then
  stop
  exit 0
fi
[[ "$cmd" == up ]] || { echo "local-slurm: unknown command '$cmd'" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "local-slurm: must run as root" >&2; exit 1; }
for p in munged slurmctld slurmd sbatch; do
  command -v "$p" >/dev/null || [[ -x /usr/sbin/$p ]] ||
    { echo "local-slurm: $p is missing (Debian: slurm-wlm, munge)" >&2; exit 1; }
done
export PATH="$PATH:/usr/sbin"
cpus=${3:-8}
host=$(hostname -s)

# munged: its own socket, as the munge user, with the machine's key. The
# sockets (and munged's files) go in a short folder of their own under
# /run, named in DIR/run-dir.
run_dir=$(mktemp -d /run/paramd-slurm.XXXXXX)
chmod 0755 "$run_dir"
echo "$run_dir" > "$dir/run-dir"
munge_dir=$run_dir/munge
start_munged "$run_dir"
cp "$munge_dir/munged.pid" "$dir/munged.pid"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
mkdir -p "$dir/state" "$run_dir/spool" "$dir/log"
{
  cat <<CONF
ClusterName=paramd-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$dir/state
SlurmdSpoolDir=$run_dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
  slurm_conf_common "$munge_dir/munge.sock"
} > "$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
# Ready when the node is idle; bounded at 30 s.
for _ in $(seq 300); do
  if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.1
done
echo "local-slurm: the node did not become idle in 30 s; see $dir/log" >&2
stop
exit 1
