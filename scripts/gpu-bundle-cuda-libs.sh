# Sourced by the GPU bundles' runners (scripts/gpu-bundle-run.sh,
# scripts/gpu-cluster-run.sh; copied into a bundle as cuda-libs.sh): says
# which device the machine has, or that it has none, and sets cublas_dir and
# cudart_dir to the folders of its own CUDA 13 libraries (empty when not
# found).

# The CUDA 13 libraries: the toolkit's, the system's, or the CUDA Python
# wheels' (nvidia/*/lib).
dirs=("${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda-*/lib64
  /usr/lib/x86_64-linux-gnu /usr/lib64)
for py in python3 /usr/bin/python3; do
  command -v "$py" >/dev/null || continue
  site="$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)"
  for s in $site; do dirs+=("$s"/nvidia/*/lib); done
done
find_lib() {
  for d in "${dirs[@]}"; do
    [[ -e "$d/$1" ]] && { echo "$d"; return 0; }
  done
  return 1
}
cublas_dir="$(find_lib libcublas.so.13)" || cublas_dir=""
cudart_dir="$(find_lib libcudart.so.13)" || cudart_dir=""
echo "== device"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
    echo "nvidia-smi found but it lists no device"
else
  echo "no NVIDIA driver on this machine (no nvidia-smi): the GPU parts will be skipped"
fi
echo "libcublas.so.13: ${cublas_dir:-not found (the CUDA backend cannot load)}"
echo "libcudart.so.13: ${cudart_dir:-not found (the CUDA backend cannot load)}"

