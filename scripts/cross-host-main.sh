#!/usr/bin/env bash
# The main job across simulated hosts (scripts/hosts.sh): its servers on
# hosts 0..S-1 and its workers on the W hosts after them, one process a
# host, every link at RATE, for each RATE given; prints one line per rate
# with the job's samples/s (the median epoch, all workers together, as
# paramctl counts it), its final test accuracy (the ranks' shares' mean),
# and what each link carried per step, measured on the hosts' interfaces
# (KB per worker step, each way: a worker host's link, and a server host's,
# averaged over the hosts). With --ddp, the same model, batch and optimizer
# under PyTorch DDP (tools/bench/torch_ddp.py --model mlp, gloo, one
# thread a rank) with W ranks on the worker hosts, right after paramd on
# the same links, its rank hosts' bytes per step, and paramd's samples/s
# over DDP's. Needs root (and python3-torch for --ddp); builds what it runs.
#
#   scripts/cross-host-main.sh [--ddp] [--servers S] [--workers W]
#       [--epochs E] [JOB.yaml] [RATE...]  (default: 2, 2, the job's; none
#                                           10gbit 1gbit)
#
# SERVER_BINARY and WORKER_BINARY, when set, run instead of this tree's
# build (to compare two builds in one sitting).
#
# RATE: "none" (veth, unshaped) or a tc rate (100mbit, 1gbit, 10gbit). The
# job file's cluster section is rewritten to S servers and W workers (its
# addresses are ignored: each process is told its host's), in a copy of
# the job's folder (its relative paths hold). A job with worker.command (a
# framework's worker, e.g. examples/pytorch/job.yaml) has each rank run
# that command in the folder, as paramctl would, with the paramd Python
# package on its PYTHONPATH. The logs of every run stay in the folder each
# line names.
set -euo pipefail
cd "$(dirname "$0")/.."

ddp=0 num_servers=2 num_workers=2 epochs=""
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --ddp) ddp=1; shift ;;
    --servers) num_servers=$2; shift 2 ;;
    --workers) num_workers=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "cross-host-main.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
source_job=configs/fashion_mnist_mlp.yaml
if [[ $# -gt 0 && "$1" == *.yaml ]]; then source_job=$1; shift; fi
rates=("$@")
((${#rates[@]} > 0)) || rates=(none 10gbit 1gbit)
[[ $(id -u) == 0 ]] || {
  echo "cross-host-main.sh: needs root (network namespaces)" >&2
  exit 1
}

bazel build --noshow_progress //server:paramd-server //worker:paramd-worker
server=${SERVER_BINARY:-$PWD/bazel-bin/server/paramd-server}
worker=${WORKER_BINARY:-$PWD/bazel-bin/worker/paramd-worker}
python_path=$PWD/bazel-bin/python/package
set_name=x$(($$ % 100000))
work=$(mktemp -d "${TMPDIR:-/tmp}/cross-host.XXXXXX")
# The job with S servers and W workers (and E epochs when given), in a
# copy of its folder.
mkdir -p "$work/job"
cp -r "$(dirname "$source_job")/." "$work/job/"
job=$work/job/$(basename "$source_job")
placeholders=$(seq 0 $((num_servers - 1)) | sed 's/.*/"127.0.0.1:4731&"/' |
  paste -sd, | sed 's/,/, /g')
sed -e "s/^\( *servers:\).*/\1 [$placeholders]/" \
  -e "s/^\( *workers:\).*/\1 $num_workers/" \
  ${epochs:+-e "s/^\( *epochs:\).*/\1 $epochs/"} "$source_job" >"$job"
epochs=$(sed -n 's/^ *epochs: *\([0-9]*\).*/\1/p' "$job" | head -1)
# worker.command, one word a line (empty: paramd-worker).
mapfile -t command < <(/usr/bin/python3 -c 'import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
print("\n".join((job.get("worker") or {}).get("command") or []))' "$job" |
  sed '/^$/d')
if ((${#command[@]} > 0)); then
  bazel build --noshow_progress //python:package
fi
batch=$(sed -n 's/^ *batch_size: *\([0-9]*\).*/\1/p' "$job" | head -1)
num_hosts=$((num_servers + num_workers))
trap 'scripts/hosts.sh down "$set_name" >/dev/null 2>&1 || true' EXIT

# Waits (bounded: 60 s) for a file to have content.
await_file() {
  for _ in $(seq 600); do
    [[ -s "$1" ]] && return 0
    sleep 0.1
  done
  echo "cross-host-main.sh: $1 never came (see $work)" >&2
  return 1
}

# Each host's counters, "HOST TX_BYTES RX_BYTES RETRANSMITTED_SEGMENTS
# RTO_EXPIRIES" a line, to $1: its interface's, and its TCP stack's.
link_bytes() {
  local k ns
  for k in $(seq 0 $((num_hosts - 1))); do
    ns=pd${set_name}h$k
    echo "$k $(ip netns exec "$ns" cat /sys/class/net/e0/statistics/tx_bytes) \
$(ip netns exec "$ns" cat /sys/class/net/e0/statistics/rx_bytes) \
$(ip netns exec "$ns" awk '/^Tcp:/ && $13 ~ /^[0-9]+$/ { print $13 }' \
      /proc/net/snmp) \
$(ip netns exec "$ns" awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) \
      if ($i == "TCPTimeouts") c = i; h = 1 } else print $c }' \
      /proc/net/netstat)"
  done >"$1"
}

# Starts the job's servers on hosts 0..S-1 and its workers on the hosts
# after them; returns once the workers ended (non-zero if one failed).
run_paramd() {
  local run=$1 servers="" k rank failed=0
  local -a pids=()
  for k in $(seq 0 $((num_servers - 1))); do
    scripts/hosts.sh run "$set_name" "$k" "$server" --job "$job" --shard "$k" \
      --listen "${addresses[$k]}:0" --port_file "$run/port$k" \
      >"$run/server$k.log" 2>&1 &
    disown  # Ended by `hosts.sh down`, not waited for.
  done
  for k in $(seq 0 $((num_servers - 1))); do
    await_file "$run/port$k"
    servers+="${servers:+,}${addresses[$k]}:$(cat "$run/port$k")"
  done
  link_bytes "$run/paramd.before"
  for rank in $(seq 0 $((num_workers - 1))); do
    if ((${#command[@]} > 0)); then
      scripts/hosts.sh run "$set_name" $((rank + num_servers)) /usr/bin/env \
        -C "$work/job" PARAMD_JOB="$job" PARAMD_RANK="$rank" \
        PARAMD_SERVERS="$servers" PYTHONPATH="$python_path" "${command[@]}" \
        >"$run/worker$rank.log" 2>&1 &
    else
      scripts/hosts.sh run "$set_name" $((rank + num_servers)) "$worker" \
        --job "$job" --rank "$rank" --servers "$servers" \
        >"$run/worker$rank.log" 2>&1 &
    fi
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k" || failed=1; done
  link_bytes "$run/paramd.after"
  return $failed
}

# DDP's W ranks on the worker hosts, rank 0's rendezvous on the first.
run_ddp() {
  local run=$1 rank failed=0
  local -a pids=()
  link_bytes "$run/ddp.before"
  for rank in $(seq 0 $((num_workers - 1))); do
    GLOO_SOCKET_IFNAME=e0 scripts/hosts.sh run "$set_name" \
      $((rank + num_servers)) /usr/bin/python3 tools/bench/torch_ddp.py \
      --model mlp --ranks "$num_workers" --epochs "${epochs:-5}" \
      --rank "$rank" --master "${addresses[$num_servers]}:29500" \
      >"$run/ddp$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in "${pids[@]}"; do wait "$rank" || failed=1; done
  link_bytes "$run/ddp.after"
  return $failed
}

echo "$num_servers servers, $num_workers workers, one a host;" \
  "KB: per worker step, out/in, measured on the links;" \
  "retr/RTO: TCP segments retransmitted / retransmission timeouts, all hosts"
printf '%-8s %10s %8s %13s %13s %11s %10s %8s %13s %11s %8s  %s\n' links \
  samples/s accuracy "worker KB" "server KB" "retr/RTO" "DDP s/s" "DDP acc" \
  "DDP rank KB" "retr/RTO" paramd/DDP logs
for rate in "${rates[@]}"; do
  run=$work/$rate
  mkdir -p "$run"
  mapfile -t addresses < <(scripts/hosts.sh up "$set_name" "$num_hosts" "$rate")
  ok=1
  run_paramd "$run" || ok=0
  if ((ok && ddp)); then run_ddp "$run" || ok=0; fi
  scripts/hosts.sh down "$set_name" >/dev/null
  if ((!ok)); then
    echo "cross-host-main.sh: a run failed at $rate (see $run)" >&2
    exit 1
  fi
  /usr/bin/python3 scripts/cross-host-figures.py "$rate" "$run" \
    --servers "$num_servers" --workers "$num_workers" --epochs "$epochs" \
    --batch "$batch" $( ((ddp)) && echo --ddp)
done
