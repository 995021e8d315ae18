#!/usr/bin/env bash
# Installs what paramd needs to build, test and train, from Debian's
# packages, when any of it is missing. Safe to run again: it installs
# nothing when everything is there.
#
#   scripts/setup.sh           what builds and trains
#   scripts/setup.sh --tests   and what the tests run beside paramd: Slurm
#                              (slurm-wlm, munge), Prometheus (prometheus,
#                              promtool), kubectl (kubernetes-client,
#                              unless a kubectl is there already), and
#                              PyTorch with pytest for the PyTorch worker
#                              (python3-torch, python3-pytest), and
#                              etcd (etcd-server)
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java g++
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev catch2 libyaml-cpp-dev zlib1g-dev
  libopenblas-dev dataset-fashion-mnist openssl librocksdb-dev
  prometheus-cpp-dev libcivetweb-dev libcurl4-openssl-dev
  python3-dev pybind11-dev python3-numpy
  golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
)

# Packages of `list` (an array name) that are not installed.
missing_of() {
  local -n list=$1
  local p
  for p in "${list[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      echo "$p"
  done
}

TEST_PACKAGES=()
if [[ "${1:-}" == --tests ]]; then
  TEST_PACKAGES=(slurm-wlm munge prometheus python3-torch python3-pytest
    etcd-server)
  command -v kubectl >/dev/null || TEST_PACKAGES+=(kubernetes-client)
fi

mapfile -t missing < <(missing_of PACKAGES)
mapfile -t missing_tests < <(missing_of TEST_PACKAGES)
if ((${#missing[@]} == 0 && ${#missing_tests[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install packages" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# What only some tests need is best effort: those tests say SKIPPED, with
# the reason, when it could not be installed.
if ((${#missing_tests[@]} > 0)); then
  echo "setup: installing for the tests: ${missing_tests[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing_tests[@]}" >/dev/null ||
    echo "setup: could not install ${missing_tests[*]}; the tests that need them will skip" >&2
fi
echo "setup: done" >&2
