#!/usr/bin/env bash
# Command 1: trains the main job — a local cluster of 2 paramd-server and 2
# paramd-worker processes on Fashion-MNIST under the sync policy — and
# writes out/summary.json. Installs what is missing first.
#
#   scripts/run-main.sh [JOB.yaml] [paramctl run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
job="configs/fashion_mnist_mlp.yaml"
if [[ $# -gt 0 && "$1" != --* ]]; then job="$1"; shift; fi
bazel build --noshow_progress //tools:paramctl
mkdir -p out
exec bazel-bin/tools/paramctl run "$job" --summary out/summary.json "$@"
