# Sourced by scripts/local-slurm.sh and scripts/cross-host-slurm.sh: what
# a Slurm of the project's making shares, run as root without systemd.

# Starts munged as the munge user with the machine's key (made if there is
# none), its socket and files in DIR/munge (DIR short and under /run: a
# Unix socket path stays under 108 bytes, and the munge user must reach
# it); DIR/munge/munged.pid holds its pid.
start_munged() {
  local dir=$1 key=/etc/munge/munge.key
  if [[ ! -s $key ]]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    dd if=/dev/urandom of=$key bs=1 count=1024 status=none
    chown munge:munge $key
    chmod 0400 $key
  fi
  install -d -o munge -g munge -m 0755 /run/munge  # munged checks it exists
  install -d -o munge -g munge -m 0755 "$dir/munge"
  runuser -u munge -- munged --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" --key-file=$key
}

# Stops the daemon of pid $1 and waits until it is gone (munged writes its
# seed file and removes its socket as it exits, so its folder can only be
# removed after): SIGTERM, up to 10 s, then SIGKILL.
stop_daemon() {
  kill -TERM "$1" 2>/dev/null || return 0
  timeout 10 tail --pid="$1" -f /dev/null 2>/dev/null ||
    kill -KILL "$1" 2>/dev/null || true
}

# slurm.conf's lines every such Slurm has: root daemons, munge at the
# socket $1, no cgroup confinement of tasks (linuxproc, task/none), cores
# as the consumable, no accounting, a node back to service once it
# answers, 10 s between SIGTERM and SIGKILL, and nodes that may claim more
# CPUs than they have (a job's servers and workers share the cores).
slurm_conf_common() {
  cat <<CONF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$1
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=10
SlurmdParameters=config_overrides
CONF
}
