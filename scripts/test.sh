#!/usr/bin/env bash
# Command 2: builds everything and runs every test, then prints the closing
# line "N passed, N failed" (", N skipped" when some were) counted from the
# real results: Catch2's test cases in each test's log, the cases a GPU
# test reports as SKIPPED when no device exists, and 1 failed for a test
# that did not build or ended without a summary (crash, timeout). Installs
# what is missing first.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test --noshow_progress //... "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

passed=0
failed=0
skipped=0
testlogs=$(bazel info bazel-testlogs 2>/dev/null)
# Bazel's per-target summary: "//pkg:name   (cached) PASSED in 0.1s"
while read -r target result; do
  file="$testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
  summary=""
  [[ -f "$file" ]] && summary=$(grep -E "^(All tests passed|test cases:|SKIPPED: [0-9]+ test case)" "$file" | tail -1)
  if [[ "$result" != PASSED && "$result" != FAILED ]] || [[ -z "$summary" ]]; then
    failed=$((failed + 1))
    continue
  fi
  if [[ "$summary" == SKIPPED:* && "$result" == PASSED ]]; then
    # SKIPPED: N test cases: reason
    n=$(echo "$summary" | sed -E 's/^SKIPPED: ([0-9]+).*/\1/')
    skipped=$((skipped + n))
    echo "$target: $summary"
  elif [[ "$summary" == "All tests passed"* ]]; then
    # All tests passed (N assertions in M test cases)
    n=$(echo "$summary" | sed -E 's/.* in ([0-9]+) test case.*/\1/')
    passed=$((passed + n))
  else
    # test cases: M | P passed | F failed
    p=$(echo "$summary" | sed -nE 's/.*\| *([0-9]+) passed.*/\1/p')
    f=$(echo "$summary" | sed -nE 's/.*\| *([0-9]+) failed.*/\1/p')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-1}))
  fi
done < <(grep -E "^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|FAILED TO BUILD|NO STATUS|TIMEOUT|FLAKY|INCOMPLETE)" "$log" |
         sed -E 's/^(\/\/[^ ]+) +(\(cached\) )?([A-Z]+( TO BUILD| STATUS)?).*/\1 \3/' | tr -s ' ' | sed 's/ TO BUILD/_TO_BUILD/; s/NO STATUS/NO_STATUS/')

if [[ $status -ne 0 && $failed -eq 0 ]]; then
  failed=1  # The build broke before any test ran.
fi
if ((skipped > 0)); then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
exit $status
