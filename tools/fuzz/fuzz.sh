#!/bin/bash
# Long, coverage-guided fuzzing of one fl_fuzz_target by hand: libFuzzer under
# AddressSanitizer and UndefinedBehaviorSanitizer (clang-15, --config=asan, in
# tools/sanitize.sh's output base, so the gcc build keeps its cache):
#
#   tools/fuzz/fuzz.sh //data:idx_reader_fuzzer [LIBFUZZER_FLAGS...]
#
# Default flags: -max_total_time=300. Give -runs=N for a fixed amount of work,
# -jobs=N -workers=N for several processes. It starts from the target's committed
# seeds (its _test's data) plus the corpus grown by earlier runs in
# $FEDKIT_FUZZ_DIR/<name> (default /tmp/fedkit-fuzz/<name>/corpus); crashing
# inputs (crash-*, leak-*, timeout-*, oom-*) land in that folder too. A crash
# found becomes a regression input: fix the bug, then copy the input into the
# target's seed folder, which its _test replays on every `bazel test`.
set -euo pipefail
cd "$(dirname "$0")/../.."

target="${1:?usage: tools/fuzz/fuzz.sh //package:name_fuzzer [LIBFUZZER_FLAGS...]}"
shift
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(-max_total_time=300)
package="${target#//}"
package="${package%%:*}"
name="${target##*:}"
work="${FEDKIT_FUZZ_DIR:-/tmp/fedkit-fuzz}/$name"

# One output base per checkout, as Bazel's own is.
base="${FEDKIT_SANITIZER_OUTPUT_BASE:-$HOME/.cache/fedkit-sanitizer/$(pwd -P | md5sum | cut -c1-12)}"
sbazel() { bazel --output_base="$base" "$@"; }
sbazel build --config=asan --symlink_prefix=/ "$target"
binary="$(sbazel info --config=asan bazel-bin 2> /dev/null)/$package/$name"

mkdir -p "$work/corpus" "$work/seeds"
for seed in $(sbazel query --noshow_progress "labels(data, $target""_test) except $target" 2> /dev/null); do
  file="${seed#//}"
  cp "${file%%:*}/${file#*:}" "$work/seeds/"
done
echo "fuzzing $target (${flags[*]}) from $(ls "$work/seeds" | wc -l) seeds; work in $work"
cd "$work"
if [[ -d /dev/shm && -w /dev/shm ]]; then
  TEST_TMPDIR=$(mktemp -d /dev/shm/fedkit-fuzz.XXXXXX)
  export TEST_TMPDIR
  trap 'rm -rf "$TEST_TMPDIR"' EXIT
fi
# As in fuzz_test.sh: an allocation over 2 GB fails, and the target must report it.
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=2048" \
  ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-15/bin/llvm-symbolizer UBSAN_OPTIONS=print_stacktrace=1 \
  "$binary" -max_len=65536 -rss_limit_mb=4096 -timeout=120 \
  -print_final_stats=1 -artifact_prefix="$work/" "${flags[@]}" "$work/corpus" "$work/seeds"
