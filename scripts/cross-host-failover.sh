#!/usr/bin/env bash
# The replicated job across simulated hosts (scripts/hosts.sh) with a
# whole server host dying mid-training: host 0 holds shard 0's primary and
# shard 1's backup, host 1 shard 1's primary and shard 0's backup, the two
# workers are on hosts 2 and 3, every link at RATE (default 1gbit). The
# job runs twice: once untouched, once with host 0 killed
# (`hosts.sh kill`: its link down, then every process on it SIGKILLed)
# once a worker has finished epoch KILL_AFTER (default 1). Prints each
# run's per-epoch figures (train loss, test accuracy) and whether they are
# identical — under sync, a fail-over that loses no step and applies none
# twice changes no bit — with the seconds the killed run took beyond the
# other, and the takeover lines of the surviving servers' logs. Needs
# root; builds what it runs.
#
#   scripts/cross-host-failover.sh [RATE] [KILL_AFTER]
set -euo pipefail
cd "$(dirname "$0")/.."

rate=${1:-1gbit}
kill_after=${2:-1}
[[ $(id -u) == 0 ]] || {
  echo "cross-host-failover.sh: needs root (network namespaces)" >&2
  exit 1
}
bazel build --noshow_progress //server:paramd-server //worker:paramd-worker
server=$PWD/bazel-bin/server/paramd-server
worker=$PWD/bazel-bin/worker/paramd-worker
set_name=f$(($$ % 100000))
work=$(mktemp -d "${TMPDIR:-/tmp}/cross-host-failover.XXXXXX")
trap 'scripts/hosts.sh down "$set_name" >/dev/null 2>&1 || true' EXIT

# Waits (bounded: 300 s) until a line matching $2 is in file $1.
await_line() {
  for _ in $(seq 3000); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "cross-host-failover.sh: '$2' never came in $1" >&2
  return 1
}

# One run in $1; with $2 = kill, host 0 dies after epoch $kill_after.
run_job() {
  local run=$1 mode=$2 h k rank failed=0 start
  local -a pids=()
  mkdir -p "$run"
  mapfile -t h < <(scripts/hosts.sh up "$set_name" 4 "$rate")
  # Ports may be fixed: every host has its own network stack.
  sed -e "s/^\( *servers:\).*/\1 [\"${h[0]}:47330\", \"${h[1]}:47331\"]/" \
    -e "s/^\( *backups:\).*/\1 [\"${h[1]}:47332\", \"${h[0]}:47333\"]/" \
    configs/fashion_mnist_mlp_replicated.yaml >"$run/job.yaml"
  for k in 0 1; do
    scripts/hosts.sh run "$set_name" "$k" "$server" --job "$run/job.yaml" \
      --shard "$k" >"$run/server$k.log" 2>&1 &
    disown
    scripts/hosts.sh run "$set_name" $((1 - k)) "$server" \
      --job "$run/job.yaml" --shard "$k" --backup >"$run/backup$k.log" 2>&1 &
    disown
  done
  start=$(date +%s.%N)
  for rank in 0 1; do
    scripts/hosts.sh run "$set_name" $((rank + 2)) "$worker" \
      --job "$run/job.yaml" --rank "$rank" >"$run/worker$rank.log" 2>&1 &
    pids+=($!)
  done
  if [[ "$mode" == kill ]]; then
    await_line "$run/worker0.log" "epoch $kill_after/"
    scripts/hosts.sh kill "$set_name" 0
    echo "killed host 0 (shard 0's primary, shard 1's backup) after epoch" \
      "$kill_after" >"$run/killed"
  fi
  for k in "${pids[@]}"; do wait "$k" || failed=1; done
  awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }' \
    >"$run/seconds"
  scripts/hosts.sh down "$set_name" >/dev/null
  return $failed
}

# The per-epoch figures of both ranks, without their speeds.
figures() {
  grep -h "epoch [0-9]*/[0-9]*:" "$1"/worker0.log "$1"/worker1.log |
    sed -e 's/^.*\(rank [0-9]*: epoch\)/\1/' -e 's/, [0-9.]* samples\/s.*//'
}

run_job "$work/untouched" none || {
  echo "cross-host-failover.sh: the untouched run failed (see $work)" >&2
  exit 1
}
run_job "$work/killed" kill || {
  echo "cross-host-failover.sh: the run with host 0 killed failed" \
    "(see $work)" >&2
  exit 1
}
echo "links $rate; logs in $work"
echo "untouched: $(cat "$work/untouched/seconds") s; host 0 killed after" \
  "epoch $kill_after: $(cat "$work/killed/seconds") s"
figures "$work/untouched" >"$work/untouched.figures"
figures "$work/killed" >"$work/killed.figures"
cat "$work/killed.figures"
if cmp -s "$work/untouched.figures" "$work/killed.figures"; then
  echo "per-epoch figures: identical to the untouched run's"
else
  echo "per-epoch figures: DIFFER from the untouched run's:"
  diff "$work/untouched.figures" "$work/killed.figures" || true
  exit 1
fi
grep -h -i "took over\|takes over\|taking over" "$work"/killed/*.log || true
