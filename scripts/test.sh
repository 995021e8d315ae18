#!/usr/bin/env bash
# Command 2: builds everything and runs every test, then again built with
# AddressSanitizer (leaks included), and prints the closing line
# "N passed, N failed" (", N skipped" when some were) counted from the real
# results of both runs: Catch2's test cases in each test's log, the
# PyTorch worker's pytest cases (plain run only), the cases a
# GPU test reports as SKIPPED when no device exists, and 1 failed for a
# test that did not build or ended without a summary (crash, timeout,
# sanitizer report), and 1 passed or failed for the check that
# docs/architecture.md's package map covers the tree. GPU tests (tagged
# "gpu") without a CUDA device are listed and counted as skipped. Installs
# what is missing first.
#
#   scripts/test.sh [bazel test flags...]   PARAMD_ASAN=0 skips the second run
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --tests || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
skipped=0
final=0
failures=()  # "label target: result" and the lines that say why, for the end

# Records a failed target for the summary printed just above the closing
# line (CI shows the end of the output): the first Catch2 failure in its
# log with the lines after it, or the log's last lines when there is none
# (a crash, a timeout, a sanitizer report).
note_failure() {
  local label=$1 target=$2 result=$3 file=$4 why=""
  if [[ -f "$file" ]]; then
    why=$(grep -m1 -A24 -E "(FAILED:|ERROR: AddressSanitizer|ERROR: LeakSanitizer)" "$file")
    [[ -z "$why" ]] && why=$(tail -15 "$file")
  fi
  failures+=("${label:+$label }$target: $result"$'\n'"$why")
}

# Adds the results in `log` (a `bazel test` output) to the counts: each
# target's Catch2 summary from its test.log under `testlogs`.
count_results() {
  local label=$1 log=$2 testlogs=$3
  local run_failed=0
  # Bazel's per-target summary: "//pkg:name   (cached) PASSED in 0.1s"
  while read -r target result; do
    local file="$testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
    local summary=""
    [[ -f "$file" ]] && summary=$(grep -E "^(All tests passed|test cases:|SKIPPED: [0-9]+ test case)" "$file" | tail -1)
    if [[ "$result" != PASSED && "$result" != FAILED ]] || [[ -z "$summary" ]]; then
      run_failed=$((run_failed + 1))
      echo "$label $target: $result, no Catch2 summary"
      note_failure "$label" "$target" "$result, no Catch2 summary" "$file"
      continue
    fi
    if [[ "$summary" == SKIPPED:* && "$result" == PASSED ]]; then
      # SKIPPED: N test cases: reason
      local n
      n=$(echo "$summary" | sed -E 's/^SKIPPED: ([0-9]+).*/\1/')
      skipped=$((skipped + n))
      echo "$label $target: $summary"
    elif [[ "$summary" == "All tests passed"* ]]; then
      # All tests passed (N assertions in M test cases)
      passed=$((passed + $(echo "$summary" | sed -E 's/.* in ([0-9]+) test case.*/\1/')))
    else
      # test cases: M | P passed | F failed
      local p f
      p=$(echo "$summary" | sed -nE 's/.*\| *([0-9]+) passed.*/\1/p')
      f=$(echo "$summary" | sed -nE 's/.*\| *([0-9]+) failed.*/\1/p')
      passed=$((passed + ${p:-0}))
      run_failed=$((run_failed + ${f:-1}))
      note_failure "$label" "$target" "$summary" "$file"
    fi
  done < <(grep -E "^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|FAILED TO BUILD|NO STATUS|TIMEOUT|FLAKY|INCOMPLETE)" "$log" |
           sed -E 's/^(\/\/[^ ]+) +(\(cached\) )?([A-Z]+( TO BUILD| STATUS)?).*/\1 \3/' | tr -s ' ' | sed 's/ TO BUILD/_TO_BUILD/; s/NO STATUS/NO_STATUS/')
  failed=$((failed + run_failed))
  return $run_failed
}

# Runs `bazel test` under the given --config (or none) with the user's
# flags, and adds its results to the counts. Tests tagged "gpu" go through
# Bazel only where a CUDA device exists; elsewhere each built GPU test is
# run once by hand, says "SKIPPED: N test cases: <reason>", and is counted
# and listed as skipped (Bazel 4 has no skipped status of its own).
run_tests() {
  local label=$1 config=$2
  shift 2
  local log
  log=$(mktemp)
  bazel test --noshow_progress $config --test_tag_filters=-gpu "$@" //... 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local testlogs bin
  testlogs=$(bazel info $config bazel-testlogs 2>/dev/null)
  bin=$(bazel info $config bazel-bin 2>/dev/null)
  count_results "$label" "$log" "$testlogs"
  local counted=$?
  if [[ $status -ne 0 && $counted -eq 0 ]]; then
    failed=$((failed + 1))  # The build broke before any test ran.
    failures+=("${label:-plain} build: bazel test exited $status before any test ran"$'\n'"$(grep -m5 -E "^ERROR:" "$log")")
  fi
  [[ $status -ne 0 ]] && final=$status
  local gpu_tests=() t on_device=()
  mapfile -t gpu_tests < <(bazel query --noshow_progress 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
  # --config=asan builds only the tests it runs (.bazelrc): build these.
  ((${#gpu_tests[@]} > 0)) &&
    bazel build --noshow_progress $config "$@" "${gpu_tests[@]}" >/dev/null 2>&1
  for t in "${gpu_tests[@]}"; do
    local exe="$bin/$(echo "${t#//}" | tr ':' '/')" said
    said=$("$exe" 2>&1 | grep -E "^SKIPPED: [0-9]+ test case" | tail -1)
    if [[ -n "$said" ]]; then
      skipped=$((skipped + $(echo "$said" | sed -E 's/^SKIPPED: ([0-9]+).*/\1/')))
      echo "$label $t SKIPPED: ${said#SKIPPED: }"
    else
      on_device+=("$t")
    fi
  done
  if ((${#on_device[@]} > 0)); then
    bazel test --noshow_progress $config "$@" "${on_device[@]}" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    count_results "$label" "$log" "$testlogs"
    [[ $status -ne 0 ]] && final=$status
  fi
  rm -f "$log"
}

# The PyTorch worker's tests (tests/python, pytest under Debian's
# /usr/bin/python3) against the plain build's paramd-server, paramctl and
# Python package, counted from pytest's JUnit XML. Not under ASan: the
# interpreter is not instrumented (FrameworkWorker's own Catch2 test is).
run_python_tests() {
  if ! /usr/bin/python3 -c "import torch, pytest" 2>/dev/null; then
    skipped=$((skipped + 1))
    echo "tests/python: SKIPPED: python3-torch or python3-pytest is not installed"
    return
  fi
  if ! bazel build --noshow_progress //server:paramd-server //tools:paramctl //python:package //python:wheel; then
    failed=$((failed + 1))
    final=1
    failures+=("tests/python: //python:package or //python:wheel did not build")
    return
  fi
  local xml log
  xml=$(mktemp)
  log=$(mktemp)
  timeout 900 /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider --junitxml="$xml" tests/python 2>&1 | tee "$log"
  local counts
  counts=$(/usr/bin/python3 - "$xml" <<'PY' 2>/dev/null
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
print(n["tests"] - n["failures"] - n["errors"] - n["skipped"],
      n["failures"] + n["errors"], n["skipped"])
PY
)
  if [[ -z "$counts" ]]; then
    failed=$((failed + 1))
    final=1
    failures+=("tests/python: pytest ended without a result (crash or timeout)"$'\n'"$(tail -15 "$log")")
  else
    local p f s
    read -r p f s <<<"$counts"
    passed=$((passed + p))
    skipped=$((skipped + s))
    if ((f > 0)); then
      failed=$((failed + f))
      final=1
      failures+=("tests/python: $f failed"$'\n'"$(grep -E "^(FAILED|ERROR) " "$log" | head -10)")
    fi
  fi
  rm -f "$xml" "$log"
}

run_tests "" "" "$@"
run_python_tests
if [[ "${PARAMD_ASAN:-1}" != 0 ]]; then
  echo "== the same tests built with AddressSanitizer (--config=asan) =="
  run_tests "asan" --config=asan "$@"
fi

# The architecture map covers every production file, and its wall-clock
# table every production file that reads absl::Now() (docs/architecture.md).
if /usr/bin/python3 scripts/architecture-map.py --check; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
  final=1
  failures+=("docs/architecture.md: its map of production files is stale (/usr/bin/python3 scripts/architecture-map.py rewrites it), or its wall-clock table misses a file that reads absl::Now() (the script names it)")
fi

if ((${#failures[@]} > 0)); then
  echo "== what failed =="
  for f in "${failures[@]}"; do
    echo "$f" | head -28
    echo
  done
fi
if ((skipped > 0)); then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
exit $final
