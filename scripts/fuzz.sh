#!/usr/bin/env bash
# Fuzzes paramd's parsers of untrusted bytes with clang's libFuzzer, each
# target for a bounded number of executions (default 1,000,000), under
# AddressSanitizer and UndefinedBehaviorSanitizer:
#   - wire_decoder: the hand-written Push/Pull decoders against protobuf's
#     own parser (any disagreement, crash or sanitizer report fails);
#   - job_file: the job-file parser (any crash, escaped exception or error
#     that does not name the file fails).
# Seeds come from tests/fuzz/corpus/; new inputs go to a scratch folder.
#
#   scripts/fuzz.sh [RUNS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-1000000}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(wire_decoder job_file)

scripts/setup.sh
if ! command -v clang++ >/dev/null; then
  echo "fuzz: installing clang" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends clang >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/gen/proto"
protoc --proto_path=proto --cpp_out="$work/gen/proto" proto/paramd.proto
absl=$(grep -o '"-labsl[^"]*"' third_party/system/BUILD.system | tr -d '"' | tr '\n' ' ')
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I. -I"$work/gen")

build() {
  local name=$1
  shift
  clang++ "${flags[@]}" -o "$work/$name" "$@" $absl -latomic -lrt -pthread
}

for t in "${targets[@]}"; do
  case "$t" in
    wire_decoder)
      build wire_decoder tests/fuzz/wire_decoder_fuzzer.cc \
        tests/wire_differential.cc common/wire/wire_format.cc \
        "$work/gen/proto/paramd.pb.cc" -lprotobuf
      corpus=tests/fuzz/corpus/wire ;;
    job_file)
      build job_file tests/fuzz/job_file_fuzzer.cc common/config/*.cc -lyaml-cpp
      corpus=tests/fuzz/corpus/job_file ;;
    *) echo "fuzz: unknown target '$t' (wire_decoder, job_file)" >&2; exit 2 ;;
  esac
  mkdir -p "$work/corpus-$t"
  echo "fuzz: $t, $runs executions" >&2
  "$work/$t" -runs="$runs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$work/corpus-$t" "$corpus" 2>"$work/$t.log" || {
    tail -40 "$work/$t.log" >&2
    echo "fuzz: $t FAILED" >&2
    exit 1
  }
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$')
  echo "fuzz: $t passed: $execs executions, $(ls "$work/corpus-$t" | wc -l) new corpus entries"
done
