#!/bin/bash
# Every sweep file of the reproductions still validates: its fields, its base
# spec and every variant's spec as the runner would build it (plugins and their
# options), so a change to a spec or a plugin's options cannot leave a
# reproduction that no longer runs. Bazel runs this in the runfiles root.
set -uo pipefail
sweep="$PWD/tools/sweep/sweep"
failures=0
count=0
for file in experiments/*/*.sweep.textproto; do
  count=$((count + 1))
  if ! output=$("$sweep" --sweep="$PWD/$file" --validate_only 2>&1); then
    echo "FAIL $file:"
    echo "$output"
    failures=$((failures + 1))
  fi
done
[[ $count -ge 18 ]] || { echo "FAIL only $count sweep files found"; exit 1; }
[[ $failures -eq 0 ]] || { echo "$failures of $count sweep files are invalid"; exit 1; }
echo "all $count sweep files are valid"
