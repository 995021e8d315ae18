#!/usr/bin/env bash
# Runs the main job with each wire compression -- none
# (configs/fashion_mnist_mlp.yaml), fp16 and top-k 1% with error feedback
# (configs/fashion_mnist_mlp_{fp16,topk}.yaml) -- alternating, ROUNDS times
# each in one sitting, and prints each run's median-epoch samples/s, final
# test accuracy and push bytes per worker step, then the medians. This
# machine's speed drifts between minutes: compare only figures from one run
# of this script.
#
#   scripts/compression-compare.sh [ROUNDS]   (default 3)
#   LINK=1gbit scripts/compression-compare.sh [ROUNDS]
#
# With LINK each job runs across simulated hosts whose links carry that
# rate each way (scripts/cross-host-main.sh: servers on two hosts, workers
# on two others; a tc rate such as 1gbit, or "none"; needs root), as on a
# real network, where the bytes matter; the push bytes are then not
# printed (they are a function of the job: the run without LINK says).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
link="${LINK:-}"
# shellcheck source=scripts/run-summary.sh
source scripts/run-summary.sh  # $out, field, median
declare -A rates accs bytes
kinds=(none fp16 topk)
for ((i = 1; i <= rounds; i++)); do
  for kind in "${kinds[@]}"; do
    job=configs/fashion_mnist_mlp.yaml
    [[ "$kind" == none ]] || job="configs/fashion_mnist_mlp_$kind.yaml"
    if [[ -n "$link" ]]; then
      # Its line: links, samples/s, accuracy, then DDP's columns and logs.
      line=$(scripts/cross-host-main.sh "$job" "$link" | tail -1)
      r=$(echo "$line" | awk '{ gsub(",", "", $2); print $2 }')
      a=$(echo "$line" | awk '{ print $3 }')
      b=- f=-
    else
      bazel-bin/tools/paramctl run "$job" --summary "$out/$kind-$i.json" \
        --log_level warn >"$out/$kind-$i.log"
      r="$(field "$out/$kind-$i.json" samples_per_second)"
      a="$(field "$out/$kind-$i.json" final_test_accuracy)"
      b="$(field "$out/$kind-$i.json" push_bytes_per_step)"
      f="$(field "$out/$kind-$i.json" push_float32_bytes_per_step)"
    fi
    printf '%-4s run %d: %8.0f samples/s, final accuracy %s, push %s bytes per worker step (float32: %s)\n' \
      "$kind" "$i" "$r" "$a" "$b" "$f"
    rates[$kind]+="$r " accs[$kind]+="$a " bytes[$kind]="$b/$f"
  done
done
[[ -z "$link" ]] || echo "across 4 hosts, links $link each way (push bytes: see a run without LINK)"
echo "| compression | push bytes / worker step | of float32 | samples/s (median) | final test accuracy |"
echo "| --- | ---: | ---: | ---: | ---: |"
for kind in "${kinds[@]}"; do
  # shellcheck disable=SC2086
  r="$(median ${rates[$kind]})"
  a="$(median ${accs[$kind]})"
  if [[ -n "$link" ]]; then
    printf '| %s | - | - | %.0f | %.4f |\n' "$kind" "$r" "$a"
    continue
  fi
  awk -v k="$kind" -v b="${bytes[$kind]}" -v r="$r" -v a="$a" 'BEGIN {
    split(b, x, "/");
    printf "| %s | %d | %.1f%% | %.0f | %.4f |\n", k, x[1], 100 * x[1] / x[2], r, a }'
done
