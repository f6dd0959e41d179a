#!/bin/bash
# The README's test command: set-up (a no-op when done), then every test target.
# Ends with a line "N passed, M failed" counting test targets.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
tools/check_plugin_umbrellas.sh || exit 1
log=$(mktemp)
bazel test //... "$@" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
summary=$(grep -E "^Executed [0-9]+ out of [0-9]+ tests?" "$log" | tail -n 1)
rm -f "$log"
if [[ -n "$summary" ]]; then
  total=$(sed -E 's/^Executed [0-9]+ out of ([0-9]+) .*/\1/' <<<"$summary")
  passed=$(grep -oE '[0-9]+ tests? pass' <<<"$summary" | grep -oE '^[0-9]+' || echo 0)
  echo "$passed passed, $((total - passed)) failed"
fi
exit "$code"
