#!/bin/bash
# Runs tools/run_experiment on a spec from the runfiles tree: $1 is the spec's
# runfiles path, the rest goes to the runner. Bazel starts this in the runfiles root.
set -euo pipefail
spec="$1"
shift
exec tools/run_experiment --spec="$PWD/$spec" "$@"
