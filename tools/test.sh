#!/bin/bash
# The README's test command: set-up (a no-op when done), every test target with
# gcc against Debian's LibTorch 1.13, then the sanitizer half (tools/sanitize.sh: the
# readers of outside bytes, their tests and fuzz targets, under ASan and UBSan with
# clang), then the torch 2.x half (tools/test_torch2.sh: PyTorch 2.11.0 from PyPI,
# the Python wheel in a fresh venv, the GPU check's dry run), then one plugin of
# every kind from tools/new_plugin.py, built and tested (tools/scaffold_check.sh).
# Flags go to every bazel command. Ends with a line "N passed, M failed" counting
# test targets of all four parts.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
# Where tools/setup.sh put the test oracles (passed to the tests by .bazelrc).
export FEDKIT_ORACLE_VENV=$(realpath -m "${FEDKIT_ORACLE_VENV:-$HOME/.cache/fedkit/oracle-venv}")
tools/check_plugin_umbrellas.sh || exit 1

passed=0
total=0
# Runs a test command, echoing its output, and adds its "Executed ..." line to the counts.
count() {
  local log code summary
  log=$(mktemp)
  "$@" 2>&1 | tee "$log"
  code=${PIPESTATUS[0]}
  summary=$(grep -E "^Executed [0-9]+ out of [0-9]+ tests?" "$log" | tail -n 1)
  rm -f "$log"
  if [[ -n "$summary" ]]; then
    total=$((total + $(sed -E 's/^Executed [0-9]+ out of ([0-9]+) .*/\1/' <<<"$summary")))
    passed=$((passed + $(grep -oE '[0-9]+ tests? pass' <<<"$summary" | grep -oE '^[0-9]+' || echo 0)))
  fi
  return "$code"
}

count bazel test //... "$@"
code=$?
echo "== the sanitizer half: tools/sanitize.sh"
count tools/sanitize.sh "$@"
sanitizer_code=$?
[[ $code -ne 0 ]] || code=$sanitizer_code
echo "== the torch 2.x half: tools/test_torch2.sh"
count tools/test_torch2.sh "$@"
torch2_code=$?
[[ $code -ne 0 ]] || code=$torch2_code
echo "== the plugin scaffold's generated code: tools/scaffold_check.sh"
count tools/scaffold_check.sh "$@"
scaffold_code=$?
[[ $code -ne 0 ]] || code=$scaffold_code
# A test that cannot run here passes saying SKIPPED and why: say it again at the
# end. Under CI (CI=true) a missing oracle is a failure: CI must run every check.
torch2_logs="$(tools/test_torch2.sh --output_base)/execroot/fedkit/bazel-out/k8-opt/testlogs"
any_skipped=0
for logs in bazel-testlogs "$torch2_logs"; do
  skipped=$(grep -rl --include=test.log "^SKIPPED: " "$logs/" 2>/dev/null | sort)
  for log in $skipped; do
    echo "skipped: ${log#"$logs"/}: $(grep -m1 "^SKIPPED: " "$log" | cut -c10-)"
    any_skipped=1
  done
done
if [[ "${CI:-}" == "true" && $any_skipped -ne 0 ]]; then
  echo "CI: the tests above skipped a check for want of its oracle; that fails CI"
  [[ $code -ne 0 ]] || code=1
fi
echo "$passed passed, $((total - passed)) failed"
exit "$code"
