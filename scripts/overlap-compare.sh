#!/usr/bin/env bash
# Runs the main job (configs/fashion_mnist_mlp.yaml) with worker.overlap
# off and on, alternating, ROUNDS times each in one sitting, and prints
# each run's median-epoch samples/s and final test accuracy, then the
# medians and their ratio. Overlap hides transfer time behind compute, so
# it is measured where the network is the bound: across simulated hosts
# (scripts/cross-host-main.sh: servers on two hosts, workers on two
# others) whose links are shaped to LINK each way (a tc rate, e.g. 1gbit;
# "none": unshaped veth). Needs root.
#
#   scripts/overlap-compare.sh [ROUNDS]          (default 3)
#   LINK=1gbit BATCH=512 EPOCHS=2 scripts/overlap-compare.sh
#
# BATCH and EPOCHS replace the job's training.batch_size and
# training.epochs (defaults: 64, 2). This machine's speed drifts between
# minutes: compare only figures from one run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
link="${LINK:-1gbit}"
batch="${BATCH:-64}"
epochs="${EPOCHS:-2}"
# shellcheck source=scripts/run-summary.sh
source scripts/run-summary.sh  # $out, median
for mode in false true; do
  sed -e "s/^  batch_size: .*/  batch_size: $batch/" \
    -e "s/^  epochs: .*/  epochs: $epochs/" \
    -e "s/^  threads: 1$/  threads: 1\n  overlap: $mode/" \
    configs/fashion_mnist_mlp.yaml >"$out/$mode.yaml"
  grep -q "overlap: $mode" "$out/$mode.yaml"
done
declare -A rates accs
for ((i = 1; i <= rounds; i++)); do
  for mode in false true; do
    # Its line: links, samples/s, accuracy, then DDP's columns and logs.
    line=$(scripts/cross-host-main.sh "$out/$mode.yaml" "$link" | tail -1)
    r=$(echo "$line" | awk '{ gsub(",", "", $2); print $2 }')
    a=$(echo "$line" | awk '{ print $3 }')
    printf 'overlap %-5s run %d: %8.0f samples/s, final accuracy %s\n' \
      "$mode" "$i" "$r" "$a"
    rates[$mode]+="$r " accs[$mode]+="$a "
  done
done
# shellcheck disable=SC2086
off="$(median ${rates[false]})" on="$(median ${rates[true]})"
echo "batch $batch, 2 workers and 2 servers on 4 hosts, $epochs epoch(s), links $link each way"
echo "| overlap | samples/s (median of $rounds) | final test accuracy (median) |"
echo "| --- | ---: | ---: |"
# shellcheck disable=SC2086
printf '| off | %.0f | %s |\n' "$off" "$(median ${accs[false]})"
# shellcheck disable=SC2086
printf '| on | %.0f | %s |\n' "$on" "$(median ${accs[true]})"
awk -v a="$off" -v b="$on" 'BEGIN { printf "on / off: %.2f×\n", b / a }'
