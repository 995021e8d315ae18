#!/usr/bin/env bash
# Kills processes of the main job on purpose while paramctl run supervises
# it, and compares the final test accuracy with undisturbed runs of the same
# job, in one sitting; then the cost of checkpoints on throughput.
#
#   1. undisturbed, per policy (sync, async, ssp), with checkpoints every
#      100 versions;
#   2. SIGKILL of a server after epoch 2 (sync, async);
#   3. SIGKILL of a worker after epoch 2 (each policy);
#   4. SIGKILL of paramctl and every process after epoch 2, then
#      `paramctl run --resume` (sync);
#   5. samples/s of the sync job with checkpoints every 100 versions and
#      without, interleaved, ROUNDS times each.
#
#   scripts/recovery-experiment.sh [ROUNDS] [throughput]   (default 2)
#
# With "throughput" only part 5 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-2}"
only="${2:-}"
bazel build --noshow_progress //tools:paramctl
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
paramctl=bazel-bin/tools/paramctl

# A copy of configs/fashion_mnist_mlp<suffix>.yaml with checkpoints (or
# none) in a folder of its own.
job() {  # job NAME SUFFIX CHECKPOINTS(yes|no)
  local file="$work/$1.yaml"
  cp "configs/fashion_mnist_mlp$2.yaml" "$file"
  if [[ "$3" == yes ]]; then
    printf 'checkpoint:\n  dir: %s\n  every_steps: 100\n' "$work/$1-ckpt" >>"$file"
  fi
  echo "$file"
}
field() { sed -n "s/^  \"$1\": \([0-9.]*\),\$/\1/p" "$2"; }
wait_for() {  # wait_for LOG TEXT
  until grep -q "$2" "$1"; do
    if ! kill -0 "$3" 2>/dev/null; then return 1; fi
    sleep 0.2
  done
}
pid_of() { sed -n "s/.*started $2 (pid \([0-9]*\)).*/\1/p" "$1" | tail -1; }

run() {  # run NAME JOB [paramctl flags]; prints accuracy and samples/s
  local name="$1" file="$2"
  shift 2
  $paramctl run "$file" --summary "$work/$name.json" --log_level warn "$@" \
    >"$work/$name.log" 2>&1
  printf '%-28s accuracy %s  %6.0f samples/s  restarts %s\n' "$name" \
    "$(field final_test_accuracy "$work/$name.json")" \
    "$(field samples_per_second "$work/$name.json")" \
    "$(field restarts "$work/$name.json")"
}

kill_run() {  # kill_run NAME JOB VICTIM
  local name="$1" file="$2" victim="$3"
  $paramctl run "$file" --summary "$work/$name.json" --log_level warn \
    >"$work/$name.log" 2>&1 &
  local ctl=$!
  wait_for "$work/$name.log" "paramctl: epoch 2/5" "$ctl"
  kill -9 "$(pid_of "$work/$name.log" "$victim")"
  wait "$ctl"
  printf '%-28s accuracy %s  %6.0f samples/s  restarts %s\n' "$name" \
    "$(field final_test_accuracy "$work/$name.json")" \
    "$(field samples_per_second "$work/$name.json")" \
    "$(field restarts "$work/$name.json")"
}

if [[ "$only" != throughput ]]; then
echo "== undisturbed (checkpoints every 100 versions)"
for p in sync async ssp; do
  suffix=""; [[ $p != sync ]] && suffix="_$p"
  run "undisturbed-$p" "$(job "u-$p" "$suffix" yes)"
done
echo "== a server SIGKILLed after epoch 2"
kill_run "server-killed-sync" "$(job k-sync "" yes)" "server 1"
kill_run "server-killed-async" "$(job k-async _async yes)" "server 0"
echo "== a worker SIGKILLed after epoch 2"
for p in sync async ssp; do
  suffix=""; [[ $p != sync ]] && suffix="_$p"
  kill_run "worker-killed-$p" "$(job "w-$p" "$suffix" yes)" "worker 1"
done
echo "== paramctl and every process SIGKILLed after epoch 2, then --resume"
file="$(job resume "" yes)"
$paramctl run "$file" --log_level warn >"$work/resume-1.log" 2>&1 &
ctl=$!
wait_for "$work/resume-1.log" "paramctl: epoch 2/5" "$ctl"
pids="$(sed -n 's/.*started [a-z]* [0-9]* (pid \([0-9]*\)).*/\1/p' "$work/resume-1.log")"
kill -9 $ctl $pids
wait "$ctl" 2>/dev/null || true
run "resumed-sync" "$file" --resume --log_level info
grep -o "shard [0-9]: restored version [0-9]*" "$work/resumed-sync.log" |
  sed 's/^/  /' || true
fi
echo "== throughput: checkpoints every 100 versions against none, interleaved"
with="$(job t-with "" yes)"
without="$(job t-without "" no)"
for ((i = 1; i <= rounds; i++)); do
  rm -rf "$work/t-with-ckpt"
  run "checkpoints-every-100-$i" "$with"
  run "no-checkpoints-$i" "$without"
done
