#!/usr/bin/env bash
# ps-lite against paramd across simulated hosts (scripts/hosts.sh), side by
# side in one run: the servers on hosts 0 and 1 (shard K on host K % 2),
# every worker on host 2 (or, WORKER_HOSTS=own, worker I on host 2 + I),
# each link shaped to RATE both ways. For each
# rate, cluster shape and payload size, ps-lite (its pslite_bench, ZeroMQ)
# and paramd-bench (gRPC, --server_processes on the other hosts) run
# alternately ROUNDS times; one table of medians per rate at the end, with
# paramd / ps-lite. With WORKER_HOSTS=shared (the default) a worker's host
# link carries every worker's bytes, as it would on one machine with two
# worker processes; with WORKER_HOSTS=own each worker is a process on a
# host of its own (paramd-bench --worker_hosts), as in a cluster.
#
#   PSLITE_BENCH=path/to/pslite_bench scripts/cross-host-transport.sh [RATE...]
#                                   (default RATEs: none 10gbit 1gbit)
#
# pslite_bench comes from the peers' folder (ps-lite master 15b8adf and
# its bench, built by its build.sh against Debian's libzmq3-dev and
# protobuf): PSLITE_BENCH names the built binary. Settings (environment):
# SIZES=4K,64K,1M,16M,64M  SHAPES=1x1,2x2 (WORKERSxSERVERS)
# MODES=push+pull  CELL_SECONDS=0.6  ROUNDS=3  WORK=folder for the logs
# WORKER_HOSTS=shared|own.
# PARAMD_FLAGS: more paramd-bench flags, e.g. "--policy sync
# --chunk_bytes 32768" for its full-duplex step (a sync step in slices).
# Both benches report "  MODE SIZE OPS GB/S FRACTION P50 P99" rows; GB/s
# counts every worker's bytes, both directions for push+pull. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

rates=("$@")
((${#rates[@]} > 0)) || rates=(none 10gbit 1gbit)
SIZES=${SIZES:-4K,64K,1M,16M,64M}
SHAPES=${SHAPES:-1x1,2x2}
MODES=${MODES:-push+pull}
WORKER_HOSTS=${WORKER_HOSTS:-shared}
[[ $WORKER_HOSTS == shared || $WORKER_HOSTS == own ]] || {
  echo "cross-host-transport.sh: WORKER_HOSTS is shared or own" >&2
  exit 2
}
CELL_SECONDS=${CELL_SECONDS:-0.6}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/cross-host-transport.XXXXXX")}
[[ $(id -u) == 0 ]] || {
  echo "cross-host-transport.sh: needs root (network namespaces)" >&2
  exit 1
}
[[ -x "${PSLITE_BENCH:-}" ]] || {
  echo "cross-host-transport.sh: set PSLITE_BENCH to a built pslite_bench" >&2
  exit 1
}
mkdir -p "$WORK"
bazel build --noshow_progress //tools:paramd-bench //server:paramd-server
bench=$PWD/bazel-bin/tools/paramd-bench
hosts=$PWD/scripts/hosts.sh
set_name=t$(($$ % 100000))
trap '"$hosts" down "$set_name" >/dev/null 2>&1 || true' EXIT
num_hosts=3
if [[ $WORKER_HOSTS == own ]]; then
  for shape in ${SHAPES//,/ }; do
    ((2 + ${shape%x*} <= num_hosts)) || num_hosts=$((2 + ${shape%x*}))
  done
fi
mapfile -t addr < <("$hosts" up "$set_name" "$num_hosts")
# worker_host I: the host of worker I.
worker_host() { if [[ $WORKER_HOSTS == own ]]; then echo $((2 + $1)); else echo 2; fi; }
ROW='^  (push|pull|push\+pull) +[0-9]+[KMG]? +[0-9]+ +[0-9.]+ '
TUNED="glibc.malloc.mmap_threshold=536870912:glibc.malloc.trim_threshold=1073741824"

# run_pslite SHAPE SIZE OUT: the scheduler and the workers on host 2, the
# servers on hosts 0 and 1; the rows of worker 0 into OUT.
run_pslite() {
  local shape=$1 size=$2 out=$3 w=${1%x*} s=${1#*x} try
  for try in 1 2 3; do
    local d port=$((20000 + RANDOM % 30000)) rc=0 i p
    d=$(mktemp -d "$WORK/pslite.XXXXXX")
    local -a pids=()
    local common=(DMLC_PS_ROOT_URI="${addr[2]}" DMLC_PS_ROOT_PORT=$port
      DMLC_NUM_SERVER=$s DMLC_NUM_WORKER=$w GLIBC_TUNABLES=$TUNED)
    local args=(--sizes "$size" --modes "$MODES" --seconds "$CELL_SECONDS" --out "$d")
    "$hosts" run "$set_name" 2 env "${common[@]}" DMLC_ROLE=scheduler \
      DMLC_NODE_HOST="${addr[2]}" timeout -k 5 120 "$PSLITE_BENCH" "${args[@]}" \
      >"$d/scheduler.out" 2>&1 &
    pids+=($!)
    for ((i = 0; i < s; ++i)); do
      "$hosts" run "$set_name" $((i % 2)) env "${common[@]}" DMLC_ROLE=server \
        DMLC_NODE_HOST="${addr[$((i % 2))]}" timeout -k 5 120 "$PSLITE_BENCH" \
        "${args[@]}" >"$d/server$i.out" 2>&1 &
      pids+=($!)
    done
    for ((i = 0; i < w; ++i)); do
      local h
      h=$(worker_host $i)
      "$hosts" run "$set_name" "$h" env "${common[@]}" DMLC_ROLE=worker \
        DMLC_NODE_HOST="${addr[$h]}" timeout -k 5 120 "$PSLITE_BENCH" "${args[@]}" \
        >"$d/worker$i.out" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cat "$d"/worker*.out | grep -E "$ROW" >"$out" || true
    if [[ $rc == 0 && -s "$out" ]]; then return 0; fi
    echo "ps-lite $shape $size failed (try $try), logs in $d" >&2
  done
  return 1
}

# run_paramd SHAPE SIZE OUT: paramd-bench on host 2, its servers on hosts 0
# and 1 (and with WORKER_HOSTS=own each worker a process on its host).
run_paramd() {
  local shape=$1 size=$2 out=$3 i
  local -a apart=()
  if [[ $WORKER_HOSTS == own ]]; then
    local list=()
    for ((i = 0; i < ${shape%x*}; ++i)); do list+=("${addr[$(worker_host $i)]}"); done
    apart=(--worker_hosts "$(IFS=,; echo "${list[*]}")"
      --worker_launch "$hosts run $set_name {addr}")
  fi
  "$hosts" run "$set_name" 2 "$bench" --server_processes \
    --server_hosts "${addr[0]},${addr[1]}" \
    --server_launch "$hosts run $set_name {host}" "${apart[@]}" --clusters "$shape" \
    --sizes "$size" --modes "$MODES" --seconds "$CELL_SECONDS" \
    --skip_optimizers ${PARAMD_FLAGS:-} >"$out.log" 2>&1 || {
    echo "paramd-bench $shape $size failed: see $out.log" >&2
    return 1
  }
  grep -E "$ROW" "$out.log" >"$out"
}

results=$WORK/results.txt  # rate impl shape size mode round gbps p50
: >"$results"
start=$(date +%s)
echo "cross-host transport: rates ${rates[*]}, shapes $SHAPES, sizes $SIZES," \
  "modes $MODES, $CELL_SECONDS s a cell, $ROUNDS rounds, worker hosts" \
  "$WORKER_HOSTS; logs in $WORK"
for rate in "${rates[@]}"; do
  "$hosts" shape "$set_name" "$rate" >/dev/null
  for shape in ${SHAPES//,/ }; do
    for size in ${SIZES//,/ }; do
      for ((r = 1; r <= ROUNDS; ++r)); do
        f=$WORK/pslite.$rate.$shape.$size.$r
        run_pslite "$shape" "$size" "$f"
        awk -v t="$rate" -v s="$shape" -v r="$r" \
          '{print t, "pslite", s, $2, $1, r, $4, $5}' "$f" >>"$results"
        f=$WORK/paramd.$rate.$shape.$size.$r
        run_paramd "$shape" "$size" "$f"
        awk -v t="$rate" -v s="$shape" -v r="$r" \
          '{print t, "paramd", s, $2, $1, r, $4, $6}' "$f" >>"$results"
      done
      echo "  $rate $shape $size done ($(($(date +%s) - start)) s)"
    done
  done
done

/usr/bin/python3 - "$results" "$ROUNDS" "$WORKER_HOSTS" <<'PY'
import statistics, sys
cells, order = {}, []
for line in open(sys.argv[1]):
    rate, impl, shape, size, mode, rnd, gbps, p50 = line.split()
    key = (rate, shape, size, mode)
    if key not in cells:
        order.append(key)
    cells.setdefault(key, {}).setdefault(impl, []).append((float(gbps), float(p50)))
where = "each worker on a host of its own" if sys.argv[3] == "own" else "workers on host 2"
print(f"\nps-lite (ZeroMQ) vs paramd (gRPC) across hosts: servers on hosts 0-1, "
      f"{where}; medians of {sys.argv[2]} alternating runs")
print(f"{'link':>7} {'size':>5} {'shape':>5} {'mode':<10} {'ps-lite GB/s':>12} "
      f"{'paramd GB/s':>11} {'paramd/ps-lite':>14} {'p50 ms ps-lite':>14} {'paramd':>7}")
for key in order:
    c = cells[key]
    if "pslite" not in c or "paramd" not in c:
        continue
    a = statistics.median(x[0] for x in c["pslite"])
    b = statistics.median(x[0] for x in c["paramd"])
    print(f"{key[0]:>7} {key[2]:>5} {key[1]:>5} {key[3]:<10} {a:>12.3f} {b:>11.3f} "
          f"{(b / a if a else float('nan')):>13.2f}x "
          f"{statistics.median(x[1] for x in c['pslite']):>14.3f} "
          f"{statistics.median(x[1] for x in c['paramd']):>7.3f}")
PY
echo "cross-host transport took $(($(date +%s) - start)) s; rows in $results"
