#!/usr/bin/env bash
# The GPU bundle's runner (copied into the bundle as run.sh by
# scripts/gpu-bundle.sh): finds the machine's own cuBLAS and CUDA runtime,
# says which device there is (or that there is none), then runs the CPU
# layer tests, the device layers on the host backend, the CUDA-against-CPU
# tests (every layer kind, the MLP's and the CNN's whole steps) and the
# CPU-vs-GPU step bench for the MLP and the CNN, with the share of device
# time in cuBLAS. A few minutes on an H200. Exit status 0 when every part
# passed or was skipped for want of a device.
#
#   run.sh [--seconds S]        (S: seconds per bench point, default 2)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The tests and the bench read configs/ from here.
cd "$here" || exit 1
seconds=2
[[ "${1:-}" == "--seconds" && -n "${2:-}" ]] && seconds="$2"
echo "paramd GPU bundle $(cat "$here/VERSION" 2>/dev/null)"

# The machine's device and its CUDA 13 libraries: cublas_dir, cudart_dir.
source "$here/cuda-libs.sh"

libpath="$here/lib"
for d in "$cublas_dir" "$cudart_dir"; do [[ -n "$d" ]] && libpath="$libpath:$d"; done
# The machine's C library where it is new enough (GLIBC_2.34); else the
# bundle's own, through its loader (the plugin is then named explicitly:
# the programs cannot see where they lie).
mode=system
# PARAMD_BUNDLE_LOADER=bundled forces the bundle's own (to try that path).
if [[ "${PARAMD_BUNDLE_LOADER:-}" == bundled ]] ||
  ! LD_LIBRARY_PATH="$libpath" "$here/bin/layers_test" --help >/dev/null 2>&1; then
  mode=bundled
fi
echo "C library: $mode"
run() {
  local bin="$here/bin/$1"
  shift
  if [[ "$mode" == system ]]; then
    LD_LIBRARY_PATH="$libpath" "$bin" "$@"
  else
    PARAMD_CUDA_PLUGIN="$here/bin/libparamd_cuda.so" \
      "$here/lib/glibc/ld-linux-x86-64.so.2" --library-path "$libpath:$here/lib/glibc" "$bin" "$@"
  fi
}

failed=0
echo "== CPU layers: forward references, backward finite differences (layers_test)"
run layers_test | tail -3
[[ ${PIPESTATUS[0]} -eq 0 ]] || failed=1
echo "== device layers on the host backend: the kernels' arithmetic against the CPU (device_layers_test)"
run device_layers_test | tail -3
[[ ${PIPESTATUS[0]} -eq 0 ]] || failed=1
echo "== GPU tests: CUDA against CPU, per layer <= 1e-4, the MLP's step <= 1e-5, TF32 off (cuda_layers_test)"
run cuda_layers_test | tail -12
[[ ${PIPESTATUS[0]} -eq 0 ]] || failed=1
echo "== CPU vs GPU worker step: the MLP (cuda_bench)"
run cuda_bench --seconds "$seconds" || failed=1
echo "== CPU vs GPU worker step: the CNN of configs/fashion_mnist_cnn.yaml (cuda_bench --job)"
run cuda_bench --seconds "$seconds" --job configs/fashion_mnist_cnn.yaml || failed=1
echo "== TF32 allowed (worker.allow_tf32: true)"
run cuda_bench --seconds 1 --allow_tf32 | sed -n '1,8p'
if [[ $failed -eq 0 ]]; then echo "gpu check: ok"; else echo "gpu check: FAILED"; fi
exit $failed
