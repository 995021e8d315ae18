#!/usr/bin/env bash
# The main job across simulated hosts (scripts/hosts.sh): its 2 servers on
# hosts 0 and 1, its 2 workers on hosts 2 and 3, every link at RATE, for
# each RATE given; prints one line per rate with the job's samples/s (the
# median epoch, both workers together, as paramctl counts it) and its final
# test accuracy (both ranks' shares). With --ddp, the same model, batch and
# optimizer under PyTorch DDP (tools/bench/torch_ddp.py --model mlp, gloo,
# one thread a rank) with its 2 ranks on hosts 2 and 3, right after paramd
# on the same links, and paramd's samples/s over DDP's. Needs root (and
# python3-torch for --ddp); builds what it runs.
#
#   scripts/cross-host-main.sh [--ddp] [JOB.yaml] [RATE...]
#                                          (default: none 10gbit 1gbit)
#
# RATE: "none" (veth, unshaped) or a tc rate (100mbit, 1gbit, 10gbit). The
# job file's cluster section must have 2 servers and 2 workers; the
# addresses in it are ignored (each process is told its host's). The logs
# of every run stay in the folder each line names.
set -euo pipefail
cd "$(dirname "$0")/.."

ddp=0
if [[ "${1:-}" == --ddp ]]; then ddp=1; shift; fi
job=configs/fashion_mnist_mlp.yaml
if [[ $# -gt 0 && "$1" == *.yaml ]]; then job=$1; shift; fi
rates=("$@")
((${#rates[@]} > 0)) || rates=(none 10gbit 1gbit)
[[ $(id -u) == 0 ]] || {
  echo "cross-host-main.sh: needs root (network namespaces)" >&2
  exit 1
}

bazel build --noshow_progress //server:paramd-server //worker:paramd-worker
server=$PWD/bazel-bin/server/paramd-server
worker=$PWD/bazel-bin/worker/paramd-worker
epochs=$(sed -n 's/^ *epochs: *\([0-9]*\).*/\1/p' "$job" | head -1)
set_name=x$(($$ % 100000))
work=$(mktemp -d "${TMPDIR:-/tmp}/cross-host.XXXXXX")
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

# Starts the job's servers on hosts 0 and 1 and its workers on hosts 2
# and 3; returns once the workers ended (non-zero if one failed).
run_paramd() {
  local run=$1 servers="" k rank failed=0
  local -a pids=()
  for k in 0 1; do
    scripts/hosts.sh run "$set_name" "$k" "$server" --job "$job" --shard "$k" \
      --listen "${addresses[$k]}:0" --port_file "$run/port$k" \
      >"$run/server$k.log" 2>&1 &
    disown  # Ended by `hosts.sh down`, not waited for.
  done
  for k in 0 1; do
    await_file "$run/port$k"
    servers+="${servers:+,}${addresses[$k]}:$(cat "$run/port$k")"
  done
  for rank in 0 1; do
    scripts/hosts.sh run "$set_name" $((rank + 2)) "$worker" --job "$job" \
      --rank "$rank" --servers "$servers" >"$run/worker$rank.log" 2>&1 &
    pids+=($!)
  done
  for k in "${pids[@]}"; do wait "$k" || failed=1; done
  return $failed
}

# DDP's two ranks on hosts 2 and 3, rank 0's rendezvous on host 2.
run_ddp() {
  local run=$1 rank failed=0
  local -a pids=()
  for rank in 0 1; do
    GLOO_SOCKET_IFNAME=e0 scripts/hosts.sh run "$set_name" $((rank + 2)) \
      /usr/bin/python3 tools/bench/torch_ddp.py --model mlp --ranks 2 \
      --epochs "${epochs:-5}" --rank "$rank" \
      --master "${addresses[2]}:29500" >"$run/ddp$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in "${pids[@]}"; do wait "$rank" || failed=1; done
  return $failed
}

printf '%-8s %12s %10s %14s %13s %10s  %s\n' links samples/s accuracy \
  "DDP samples/s" "DDP accuracy" paramd/DDP logs
for rate in "${rates[@]}"; do
  run=$work/$rate
  mkdir -p "$run"
  mapfile -t addresses < <(scripts/hosts.sh up "$set_name" 4 "$rate")
  ok=1
  run_paramd "$run" || ok=0
  if ((ok && ddp)); then run_ddp "$run" || ok=0; fi
  scripts/hosts.sh down "$set_name" >/dev/null
  if ((!ok)); then
    echo "cross-host-main.sh: a run failed at $rate (see $run)" >&2
    exit 1
  fi
  /usr/bin/python3 scripts/cross-host-figures.py "$rate" "$run" \
    $( ((ddp)) && echo --ddp)
done
