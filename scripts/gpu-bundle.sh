#!/usr/bin/env bash
# Builds the GPU bundle: paramd's CUDA test and bench binaries with every
# non-CUDA shared library they load, and a runner (run.sh), for a machine
# that has a GPU and CUDA but no Debian packages, Bazel or registry. The
# device's own libcublas/libcudart are found there by the runner.
#
# With --cluster, the cluster bundle instead: paramd-server, paramd-worker,
# paramctl and the CUDA plugin, the Fashion-MNIST files, and the main job
# and the CNN job with worker.device: cuda, whose runner trains both as
# local clusters there. It uses the machine's own C library, carries no
# OpenBLAS (a CUDA worker does not load it) and fits, with this checkout,
# in 64 MiB.
#
#   scripts/gpu-bundle.sh [--cluster] [OUT_DIR]
#                               (default out/gpu-bundle, out/gpu-cluster)
#   OUT_DIR/run.sh              (on the GPU machine, or here)
set -euo pipefail
cd "$(dirname "$0")/.."

cluster=0
if [[ "${1:-}" == --cluster ]]; then cluster=1; shift; fi
if [[ $cluster -eq 1 ]]; then out="${1:-out/gpu-cluster}"; else out="${1:-out/gpu-bundle}"; fi
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "gpu-bundle: no CUDA toolkit at /usr/local/cuda: the CUDA backend cannot be built here" >&2
  exit 1
fi
scripts/setup.sh --tests

# Copies every library the files $@ load into $out/lib, but the CUDA ones
# (the device's own are used) and the C library's (into $out/lib/glibc, for
# the test runner's fallback loader, unless GLIBC_DIR is empty).
copy_libs() {
  local libs
  libs="$(for f in "$@"; do
    LD_LIBRARY_PATH=/usr/local/cuda/lib64 ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
  done | sort -u)"
  while read -r name path; do
    case "$name" in
      libcuda.so* | libcublas* | libcudart* | libnvidia* | libcublasLt*) continue ;;
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*)
        [[ -n "$GLIBC_DIR" ]] && cp -L "$path" "$GLIBC_DIR/$name" ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done <<<"$libs"
  chmod -R u+w "$out/lib"
}

if [[ $cluster -eq 1 ]]; then
  bazel build --noshow_progress //server:paramd-server //worker:paramd-worker \
    //tools:paramctl //worker:libparamd_cuda.so
  data=/usr/share/datasets/fashion-mnist
  [[ -r "$data/train-images-idx3-ubyte.gz" ]] || {
    echo "gpu-bundle: no Fashion-MNIST at $data (scripts/setup.sh installs it)" >&2
    exit 1
  }
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib" "$out/configs" "$out/data"
  bins=(bazel-bin/server/paramd-server bazel-bin/worker/paramd-worker bazel-bin/tools/paramctl)
  cp -L "${bins[@]}" bazel-bin/worker/libparamd_cuda.so "$out/bin/"
  chmod u+w "$out"/bin/*
  GLIBC_DIR="" copy_libs "${bins[@]}" bazel-bin/worker/libparamd_cuda.so
  cp -L "$data"/*-ubyte.gz "$out/data/"
  # The shipped jobs on the GPU, reading the bundle's data (a relative
  # data.dir resolves against the job file's folder).
  for job in fashion_mnist_mlp fashion_mnist_cnn; do
    sed -e 's|^  dir: .*|  dir: ../data|' -e 's|^  device: .*|  device: cuda|' \
      "configs/$job.yaml" >"$out/configs/$job.yaml"
    grep -q '^  device: cuda' "$out/configs/$job.yaml" &&
      grep -q '^  dir: ../data' "$out/configs/$job.yaml" || {
      echo "gpu-bundle: configs/$job.yaml has no worker.device or data.dir line to set" >&2
      exit 1
    }
  done
  cp scripts/gpu-cluster-run.sh "$out/run.sh"
  cp scripts/gpu-bundle-cuda-libs.sh "$out/cuda-libs.sh"
  chmod +x "$out/run.sh"
  git rev-parse --short HEAD >"$out/VERSION" 2>/dev/null || true
  echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)); run $out/run.sh where the GPU is"
  exit 0
fi

bazel build --noshow_progress //tests/worker:cuda_layers_test //tests/worker:device_layers_test \
  //tests/worker:layers_test //tools:cuda_bench //worker:libparamd_cuda.so

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/glibc" "$out/configs"
bins=(bazel-bin/tests/worker/cuda_layers_test bazel-bin/tests/worker/device_layers_test
  bazel-bin/tests/worker/layers_test bazel-bin/tools/cuda_bench)
cp -L "${bins[@]}" bazel-bin/worker/libparamd_cuda.so "$out/bin/"
chmod u+w "$out"/bin/*

# OpenBLAS is loaded at run time (worker/model/blas.h), so ldd does not
# list it: take it by name.
# (awk reads to the end: an early exit would kill ldconfig with SIGPIPE,
# which pipefail turns into this script's silent end.)
openblas="$(ldconfig -p | awk '$1 == "libopenblas.so.0" && !found { print $NF; found = 1 }')"
[[ -n "$openblas" ]] || { echo "gpu-bundle: libopenblas.so.0 not found" >&2; exit 1; }

# Every library the binaries, the plugin and OpenBLAS load.
GLIBC_DIR="$out/lib/glibc" copy_libs "${bins[@]}" bazel-bin/worker/libparamd_cuda.so "$openblas"
cp -L "$openblas" "$out/lib/libopenblas.so.0"
cp -L /lib64/ld-linux-x86-64.so.2 "$out/lib/glibc/ld-linux-x86-64.so.2"
chmod -R u+w "$out/lib"
# The CNN the tests and the bench load (the runner works from the bundle).
cp configs/fashion_mnist_cnn.yaml "$out/configs/"
cp scripts/gpu-bundle-run.sh "$out/run.sh"
cp scripts/gpu-bundle-cuda-libs.sh "$out/cuda-libs.sh"
chmod +x "$out/run.sh"
git rev-parse --short HEAD >"$out/VERSION" 2>/dev/null || true
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)); run $out/run.sh where the GPU is"
