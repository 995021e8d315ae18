#!/usr/bin/env bash
# Runs the main job plain and with TLS + a job token
# (configs/fashion_mnist_mlp_tls.yaml), alternating, ROUNDS times each in
# one sitting, and prints each run's median-epoch samples/s and the ratio
# of the medians. This machine's speed drifts between minutes: compare
# only figures from one run of this script.
#
#   scripts/tls-compare.sh [ROUNDS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
bazel build --noshow_progress //tools:paramctl
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
rate() {
  sed -n 's/^  "samples_per_second": \([0-9.]*\),$/\1/p' "$1"
}
accuracy() {
  sed -n 's/^  "final_test_accuracy": \([0-9.]*\),$/\1/p' "$1"
}
plain=() tls=()
for ((i = 1; i <= rounds; i++)); do
  for kind in plain tls; do
    job=configs/fashion_mnist_mlp.yaml
    flags=()
    if [[ "$kind" == tls ]]; then
      job=configs/fashion_mnist_mlp_tls.yaml
      flags=(--make-secrets)
    fi
    bazel-bin/tools/paramctl run "$job" "${flags[@]}" \
      --summary "$out/$kind-$i.json" --log_level warn >"$out/$kind-$i.log"
    r="$(rate "$out/$kind-$i.json")"
    printf '%-5s run %d: %8.0f samples/s, final accuracy %s\n' \
      "$kind" "$i" "$r" "$(accuracy "$out/$kind-$i.json")"
    if [[ "$kind" == tls ]]; then tls+=("$r"); else plain+=("$r"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mp="$(median "${plain[@]}")"
mt="$(median "${tls[@]}")"
awk -v p="$mp" -v t="$mt" 'BEGIN {
  printf "median: plain %.0f samples/s, TLS+token %.0f samples/s, TLS/plain %.3f\n", p, t, t / p }'
