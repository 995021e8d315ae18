#!/usr/bin/env bash
# Installs what paramd needs to build, test and train, from Debian's
# packages, when any of it is missing. Safe to run again: it installs
# nothing when everything is there.
#
#   scripts/setup.sh           what builds and trains
#   scripts/setup.sh --tests   and what the tests run beside paramd: Slurm
#                              (slurm-wlm, munge), Prometheus (prometheus,
#                              promtool) and kubectl (kubernetes-client,
#                              unless a kubectl is there already)
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java g++
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev catch2 libyaml-cpp-dev zlib1g-dev
  libopenblas-dev dataset-fashion-mnist openssl
)

if [[ "${1:-}" == --tests ]]; then
  PACKAGES+=(slurm-wlm munge prometheus)
  command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install packages" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
