#!/usr/bin/env bash
# The straggler experiment: the main job with rank 1 slowed by a fixed
# delay per step (testing.slow_rank), once under each of sync, ssp
# (staleness 3) and async, one after another on this machine. Prints time
# to finish and final accuracy from each run's summary.
#
#   scripts/straggler-experiment.sh [SLOW_STEP_MS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

slow_ms="${1:-3}"
scripts/setup.sh
bazel build --noshow_progress //tools:paramctl
out="out/straggler"
mkdir -p "$out"

run() {  # NAME BASE_CONFIG POLICY_SED
  local name="$1" base="$2" policy="$3"
  local job="$out/$name.yaml"
  sed -e "$policy" "$base" > "$job"
  printf 'testing:\n  slow_rank: 1\n  slow_step_ms: %s\n' "$slow_ms" >> "$job"
  bazel-bin/tools/paramctl run "$job" --summary "$out/$name.json" > "$out/$name.log" 2>&1
}
field() { sed -nE "s/.*\"$2\": ([0-9.]+).*/\1/p" "$out/$1.json" | head -1; }

run sync configs/fashion_mnist_mlp.yaml ''
run ssp3 configs/fashion_mnist_mlp_ssp.yaml 's/  staleness: 2/  staleness: 3/'
run async configs/fashion_mnist_mlp_async.yaml ''

echo "rank 1 slowed by ${slow_ms} ms per step; 2 servers, 2 workers, 5 epochs"
printf '%-8s %14s %16s %14s\n' policy wall_seconds final_accuracy samples/s
for name in sync ssp3 async; do
  printf '%-8s %14s %16s %14s\n' "$name" "$(field $name wall_seconds)" \
    "$(field $name final_test_accuracy)" "$(field $name samples_per_second)"
done
