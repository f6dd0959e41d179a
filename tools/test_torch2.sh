#!/bin/bash
# The torch-2.x half of the test suite (tools/test.sh runs it after the Debian
# half): fetches PyTorch 2.11.0 once (tools/setup_torch2.sh), builds every target
# with --config=torch2 in a Bazel output base of its own (so that neither build
# throws away the other's cache), runs the tests of fl/ (the Python wheel's test
# among them), aggregators/, models/ and data/, then packs the GPU archive linked
# CPU-only and dry-runs the GPU check from it (tools/device_build/gpu_check.sh
# --dry-run).
#
#   tools/test_torch2.sh [--all] [more bazel test flags]   # --all: every test target
#   tools/test_torch2.sh --output_base                      # prints the output base
# Ends with the same "Executed ..." summary as bazel test, counting the dry run as
# one more test.
set -uo pipefail
cd "$(dirname "$0")/.."
base="${FEDKIT_TORCH2_OUTPUT_BASE:-$HOME/.cache/fedkit-torch2/$(pwd -P | md5sum | cut -c1-12)}"
if [[ "${1:-}" == "--output_base" ]]; then
  echo "$base"
  exit 0
fi
tools/setup_torch2.sh || exit 1
# The test oracles tools/setup.sh installs (tools/test.sh exports the same).
export FEDKIT_ORACLE_VENV=$(realpath -m "${FEDKIT_ORACLE_VENV:-$HOME/.cache/fedkit/oracle-venv}")
tbazel() { bazel --output_base="$base" "$@"; }
# The top-level folders by name, not //...: that would also walk the Debian build's
# bazel-* links, which this output base does not know as its own.
everything=(//fl/... //models/... //data/... //aggregators/... //experiments/... //tools/...)
tested=(//fl/... //aggregators/... //models/... //data/...)
if [[ "${1:-}" == "--all" ]]; then
  shift
  tested=("${everything[@]}")
fi
# --symlink_prefix=/: no bazel-* links, which would point the workspace's at this output base.
flags=(--config=torch2 --symlink_prefix=/ --keep_going)
tbazel build "${flags[@]}" "$@" "${everything[@]}"
build_code=$?
log=$(mktemp)
tbazel test "${flags[@]}" "$@" "${tested[@]}" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
[[ $code -ne 0 ]] || code=$build_code

echo "== the GPU check's dry run, from an archive linked CPU-only"
dry=$(mktemp -d)
dry_code=1
wheel=$(ls "$(tbazel info --config=torch2 bazel-bin 2> /dev/null)"/fl/python/fedkit-*.whl 2> /dev/null | head -n 1)
if [[ -n "$wheel" ]] && tools/device_build/pack.sh "$dry" --cpu --wheel="$wheel" &&
   tar -C "$dry" -xJf "$dry/fedkit-gpu.tar.xz" &&
   "$dry/fedkit-gpu/tools/device_build/gpu_check.sh" --dry-run --out="$dry/out" \
     --python="$(tools/setup_torch2.sh --print-python)"; then
  dry_code=0
fi
rm -rf "$dry"
[[ $code -ne 0 ]] || code=$dry_code

# One summary line for tools/test.sh's count, the dry run included.
summary=$(grep -E "^Executed [0-9]+ out of [0-9]+ tests?" "$log" | tail -n 1)
rm -f "$log"
total=$(sed -E 's/^Executed [0-9]+ out of ([0-9]+) .*/\1/' <<< "${summary:-Executed 0 out of 0 tests}")
passed=$(grep -oE '[0-9]+ tests? pass' <<< "$summary" | grep -oE '^[0-9]+' || echo 0)
[[ $dry_code -ne 0 ]] || passed=$((passed + 1))
echo "Executed $((total + 1)) out of $((total + 1)) tests: $passed tests pass (torch 2.x half, the GPU dry run included)."
exit "$code"
