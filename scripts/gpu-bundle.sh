#!/usr/bin/env bash
# Builds the GPU bundle: paramd's CUDA test and bench binaries with every
# non-CUDA shared library they load, and a runner (run.sh), for a machine
# that has a GPU and CUDA but no Debian packages, Bazel or registry. The
# device's own libcublas/libcudart are found there by the runner.
#
#   scripts/gpu-bundle.sh [OUT_DIR]     (default out/gpu-bundle)
#   OUT_DIR/run.sh                      (on the GPU machine, or here)
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-out/gpu-bundle}"
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu-bundle: no CUDA toolkit at /usr/local/cuda: the CUDA backend cannot be built here" >&2
  exit 1
fi
scripts/setup.sh --tests
bazel build --noshow_progress //tests:cuda_layers_test //tests:device_layers_test \
  //tests:layers_test //tools:cuda_bench //worker:libparamd_cuda.so

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/glibc" "$out/configs"
bins=(bazel-bin/tests/cuda_layers_test bazel-bin/tests/device_layers_test
  bazel-bin/tests/layers_test bazel-bin/tools/cuda_bench)
cp -L "${bins[@]}" bazel-bin/worker/libparamd_cuda.so "$out/bin/"
chmod u+w "$out"/bin/*

# OpenBLAS is loaded at run time (worker/model/blas.h), so ldd does not
# list it: take it by name.
# (awk reads to the end: an early exit would kill ldconfig with SIGPIPE,
# which pipefail turns into this script's silent end.)
openblas="$(ldconfig -p | awk '$1 == "libopenblas.so.0" && !found { print $NF; found = 1 }')"
[[ -n "$openblas" ]] || { echo "gpu-bundle: libopenblas.so.0 not found" >&2; exit 1; }

# Every library the binaries, the plugin and OpenBLAS load, but the CUDA
# ones (the device's own are used) and the C library's (kept apart, for
# the runner's fallback loader only).
libs="$(for f in "${bins[@]}" bazel-bin/worker/libparamd_cuda.so "$openblas"; do
  LD_LIBRARY_PATH=/usr/local/cuda/lib64 ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u)"
while read -r name path; do
  case "$name" in
    libcuda.so* | libcublas* | libcudart* | libnvidia* | libcublasLt*) continue ;;
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*)
      cp -L "$path" "$out/lib/glibc/$name" ;;
    *) cp -L "$path" "$out/lib/$name" ;;
  esac
done <<<"$libs"
cp -L "$openblas" "$out/lib/libopenblas.so.0"
cp -L /lib64/ld-linux-x86-64.so.2 "$out/lib/glibc/ld-linux-x86-64.so.2"
chmod -R u+w "$out/lib"
# The CNN the tests and the bench load (the runner works from the bundle).
cp configs/fashion_mnist_cnn.yaml "$out/configs/"
cp scripts/gpu-bundle-run.sh "$out/run.sh"
chmod +x "$out/run.sh"
git rev-parse --short HEAD >"$out/VERSION" 2>/dev/null || true
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)); run $out/run.sh where the GPU is"
