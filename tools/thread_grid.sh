#!/bin/bash
# Times each benchmark spec under a grid of (workers, threads) choices, and under
# the runner's own choice, and writes report.md and grid.csv:
#   bazel run -c opt //tools:thread_grid -- [--out DIR] [--repeats N]
# DIR defaults to results/thread_grid under the folder bazel was run from. Nothing
# else should run on the machine meanwhile: these are timings.
set -euo pipefail
out="${BUILD_WORKING_DIRECTORY:-$PWD}/results/thread_grid"
repeats=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; [[ "$out" = /* ]] || out="${BUILD_WORKING_DIRECTORY:-$PWD}/$out"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "usage: thread_grid [--out DIR] [--repeats N]" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
exec "$py" tools/thread_grid.py --runner "$PWD/tools/run_experiment" --specs "$PWD" \
  --out "$out" --repeats "$repeats"
