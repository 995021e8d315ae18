#!/usr/bin/env bash
# Runs the main job (configs/fashion_mnist_mlp.yaml) with worker.overlap
# off and on, alternating, ROUNDS times each in one sitting, and prints
# each run's median-epoch samples/s and final test accuracy, then the
# medians and their ratio. Overlap hides transfer time behind compute, so
# it is measured where the network is the bound: every shard's link is
# shaped to LINK_MBPS megabits per second each way (testing.link_mbps,
# server/faults/link_shaper.h; 0: loopback as it is).
#
#   scripts/overlap-compare.sh [ROUNDS]          (default 3)
#   LINK_MBPS=1000 BATCH=512 WORKERS=1 EPOCHS=2 scripts/overlap-compare.sh
#
# BATCH, WORKERS and EPOCHS replace the job's training.batch_size,
# cluster.workers and training.epochs (defaults: 64, 2, 2). This machine's
# speed drifts between minutes: compare only figures from one run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
link="${LINK_MBPS:-1000}"
batch="${BATCH:-64}"
workers="${WORKERS:-2}"
epochs="${EPOCHS:-2}"
# shellcheck source=scripts/run-summary.sh
source scripts/run-summary.sh  # $out, field, median
for mode in false true; do
  sed -e "s/^  batch_size: .*/  batch_size: $batch/" \
    -e "s/^  workers: .*/  workers: $workers/" \
    -e "s/^  epochs: .*/  epochs: $epochs/" \
    -e "s/^  threads: 1$/  threads: 1\n  overlap: $mode/" \
    configs/fashion_mnist_mlp.yaml >"$out/$mode.yaml"
  grep -q "overlap: $mode" "$out/$mode.yaml"
  if [[ "$link" != 0 ]]; then
    printf 'testing:\n  link_mbps: %s\n' "$link" >>"$out/$mode.yaml"
  fi
done
declare -A rates accs
for ((i = 1; i <= rounds; i++)); do
  for mode in false true; do
    bazel-bin/tools/paramctl run "$out/$mode.yaml" \
      --summary "$out/$mode-$i.json" --log_level warn >"$out/$mode-$i.log"
    r="$(field "$out/$mode-$i.json" samples_per_second)"
    a="$(field "$out/$mode-$i.json" final_test_accuracy)"
    printf 'overlap %-5s run %d: %8.0f samples/s, final accuracy %s\n' \
      "$mode" "$i" "$r" "$a"
    rates[$mode]+="$r " accs[$mode]+="$a "
  done
done
# shellcheck disable=SC2086
off="$(median ${rates[false]})" on="$(median ${rates[true]})"
echo "batch $batch, $workers worker(s), $epochs epoch(s), links ${link} Mb/s each way per shard (0: not shaped)"
echo "| overlap | samples/s (median of $rounds) | final test accuracy (median) |"
echo "| --- | ---: | ---: |"
# shellcheck disable=SC2086
printf '| off | %.0f | %s |\n' "$off" "$(median ${accs[false]})"
# shellcheck disable=SC2086
printf '| on | %.0f | %s |\n' "$on" "$(median ${accs[true]})"
awk -v a="$off" -v b="$on" 'BEGIN { printf "on / off: %.2f×\n", b / a }'
