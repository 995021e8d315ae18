#!/usr/bin/env bash
# The cluster bundle's runner (copied into it as run.sh by
# `scripts/gpu-bundle.sh --cluster`): finds the machine's own cuBLAS and CUDA
# runtime, says which device there is, then trains the main job and the CNN
# job as local clusters (2 paramd-server and 2 paramd-worker processes each,
# over gRPC on loopback) with worker.device: cuda, and prints each run's
# summary and the workers' word on their device. Exit status 0 when both
# jobs ran to the end.
#
#   run.sh [RESULTS_DIR] [JOB...]   (default: ./results; both jobs)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
results="$(realpath -m "${1:-$here/results}")"
shift || true
jobs=("$@")
[[ ${#jobs[@]} -gt 0 ]] || jobs=(fashion_mnist_mlp fashion_mnist_cnn)
echo "paramd GPU cluster bundle $(cat "$here/VERSION" 2>/dev/null)"
source "$here/cuda-libs.sh"
if [[ -z "$cublas_dir" || -z "$cudart_dir" ]]; then
  echo "gpu cluster: the machine's CUDA 13 libraries were not found: no job run"
  exit 1
fi
# Every process of the cluster (paramctl starts them) loads its libraries
# from here; each finds the others and the CUDA plugin beside itself.
export LD_LIBRARY_PATH="$here/lib:$cublas_dir:$cudart_dir"
mkdir -p "$results"
cd "$here/configs" || exit 1
failed=0
for job in "${jobs[@]}"; do
  echo "== $job (worker.device: cuda)"
  start=$(date +%s.%N)
  "$here/bin/paramctl" run "$job.yaml" --summary "$results/$job.json" \
    >"$results/$job.log" 2>&1
  code=$?
  end=$(date +%s.%N)
  echo "paramctl run: exit $code, $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
  grep -m 4 -E "worker.device|FAILED|error" "$results/$job.log"
  if [[ $code -ne 0 ]]; then
    failed=1
    tail -20 "$results/$job.log"
    continue
  fi
  sed -n '1,/epoch_metrics/p' "$results/$job.json" | grep -v epoch_metrics
  grep '"epoch"' "$results/$job.json"
done
if [[ $failed -eq 0 ]]; then echo "gpu cluster: ok"; else echo "gpu cluster: FAILED"; fi
exit $failed
