#!/usr/bin/env bash
# ./run's run_ctest runs a test that failed beside others again, alone: the
# same test, also when the run was filtered by label (-L) or exclusion (-E),
# where ctest numbers its tests differently from an unfiltered run. A
# throwaway ctest project: one test fails the first time only.
# Usage: rerun_by_name_test.sh PATH_TO_RUN
set -euo pipefail
run_script=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(rerun NONE)
enable_testing()
add_test(NAME zeta COMMAND true)
add_test(NAME alpha COMMAND true)
add_test(NAME beta.once COMMAND sh -c "[ -e '$work/ran' ] && exit 0; touch '$work/ran'; exit 1")
set_tests_properties(alpha beta.once PROPERTIES LABELS kept)
CMAKE
cmake -S "$work" -B "$work/build" >/dev/null
sed -n '/^run_ctest() {/,/^}/p' "$run_script" >"$work/run_ctest.sh"
grep -q '^run_ctest() {' "$work/run_ctest.sh" || { echo "no run_ctest in $run_script"; exit 1; }
out=$(set -euo pipefail; CTEST_JOBS=2; . "$work/run_ctest.sh"; run_ctest "$work/build" -L kept -E zeta 2>&1) || {
    echo "$out"; echo "FAIL: run_ctest failed although beta.once passes when run again"; exit 1; }
echo "$out"
again=$(echo "$out" | sed -n '/== run again/,$p')
echo "$again" | grep -Eq 'Test +#[0-9]+: beta\.once .*Passed' || { echo "FAIL: beta.once was not run again"; exit 1; }
if echo "$again" | grep -Eq 'Test +#[0-9]+: alpha'; then echo "FAIL: alpha was run again in beta.once's place"; exit 1; fi
echo "PASS: the failed test, and only it, ran again by name"
