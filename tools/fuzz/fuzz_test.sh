#!/bin/bash
# One bounded fuzzing run of an fl_fuzz_target, as its `_test`:
#
#   fuzz_test.sh BINARY -runs=N SEED_FILE...
#
# BINARY is the target built by //fl:build_defs.bzl's fl_fuzz_target: real
# libFuzzer under `--config=asan` (coverage-guided, AddressSanitizer and
# UndefinedBehaviorSanitizer), the blind mutator of //tools/fuzz:driver
# otherwise. Either takes the same flags. -runs caps the executions, seeds
# included, so a slow machine does the same work as a fast one and a run is
# repeatable (-seed=1). The seeds are copied into a folder the fuzzer may add to;
# a crashing input goes to the test's undeclared outputs (outputs.zip).
set -euo pipefail
binary="$1"
runs="$2"
shift 2
work="${TEST_TMPDIR:-$(mktemp -d)}/fuzz"
rm -rf "$work"
mkdir -p "$work/found" "$work/seeds"
i=0
for seed in "$@"; do
  cp "$seed" "$work/seeds/$i-$(basename "$seed")"
  i=$((i + 1))
done
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/"
# An allocation over 2 GB fails (returns null, so LibTorch throws) instead of
# aborting: the target must report it, as it must on a machine without the memory.
# The gcc driver caps its address space to the same end.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=2048"
# Targets that read files write each input to $TEST_TMPDIR: in memory where the
# machine has a tmpfs, which makes them several times faster.
if [[ -d /dev/shm && -w /dev/shm ]]; then
  TEST_TMPDIR=$(mktemp -d /dev/shm/fedkit-fuzz.XXXXXX)
  export TEST_TMPDIR
  trap 'rm -rf "$TEST_TMPDIR"' EXIT
fi
echo "fuzzing $(basename "$binary") for $runs ($i seed inputs)"
"$binary" "$runs" -seed=1 -max_len=65536 -rss_limit_mb=4096 -timeout=120 \
  -print_final_stats=1 -artifact_prefix="$artifacts" "$work/found" "$work/seeds"
