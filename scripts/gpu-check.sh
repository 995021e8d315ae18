#!/usr/bin/env bash
# The GPU check, for a machine with a CUDA device (an H100/H200 class GPU):
# builds, runs the GPU tests (CUDA against CPU), and benchmarks a worker's
# compute step (the MLP and the CNN) on CPU and GPU. About two minutes on an H200 once built.
#
#   scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."

command -v bazel >/dev/null || scripts/setup.sh || exit 1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

echo "== build"
bazel build --noshow_progress //tools:cuda_bench //tests/worker:cuda_layers_test //tests/worker:model_factory_test || exit 1

echo "== GPU tests (CUDA vs CPU per layer <= 1e-4, the MLP's step <= 1e-5, TF32 off)"
bazel test --noshow_progress --test_output=all //tests/worker:cuda_layers_test //tests/worker:model_factory_test 2>&1 |
  grep -E "SKIPPED|All tests passed|test cases:|FAILED|PASSED|relative error" 
tests_rc=${PIPESTATUS[0]}

echo "== CPU vs GPU worker step: the MLP, then the CNN"
bazel-bin/tools/cuda_bench --seconds 2
bench_rc=$?
bazel-bin/tools/cuda_bench --seconds 2 --job configs/fashion_mnist_cnn.yaml || bench_rc=1
echo "== TF32 allowed (worker.allow_tf32: true)"
bazel-bin/tools/cuda_bench --seconds 1 --allow_tf32 | sed -n '1,8p'

exit $((tests_rc != 0 || bench_rc != 0))
