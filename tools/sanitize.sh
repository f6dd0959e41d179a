#!/bin/bash
# The sanitizer half of the test suite (tools/test.sh runs it after the main half),
# built with clang-15 under AddressSanitizer and UndefinedBehaviorSanitizer
# (--config=asan in .bazelrc), each fuzz target as real libFuzzer for its bounded
# number of executions. By default, the tests tagged "sanitize": every reader of
# outside bytes (datasets, checkpoints, model files, wire records, specs' text) with
# its unit tests and fuzz target, about 40 files to compile. With --all, also every
# other test of fl/ and data/ and the fuzz targets that link every plugin (spec and
# sweep validation), about 210 files.
# It builds in a Bazel output base of its own, so that switching compilers does
# not throw away the gcc build's cache.
#
#   tools/sanitize.sh [--all] [more bazel test flags]
# Ends with the same "Executed ..." summary as bazel test.
set -uo pipefail
cd "$(dirname "$0")/.."
# One output base per checkout, as Bazel's own is.
base="${FEDKIT_SANITIZER_OUTPUT_BASE:-$HOME/.cache/fedkit-sanitizer/$(pwd -P | md5sum | cut -c1-12)}"
sbazel() { bazel --output_base="$base" "$@"; }
# The top-level folders by name, not //...: that would also walk the gcc build's
# bazel-* links, which this output base does not know as its own.
everything="//fl/... + //models/... + //data/... + //aggregators/... + //experiments/... + //tools/..."
selection="attr(tags, '\bsanitize\b', tests($everything))"
if [[ "${1:-}" == "--all" ]]; then
  shift
  # Not the Python module's tests (py_tests, and the C++ test that runs Python
  # plugins): Python itself is not built with the sanitizers.
  selection="(tests(//fl/... + //data/...) except tests(//fl/python/...)) + attr(tags, '\bfuzz\b', tests($everything))"
fi
targets=$(sbazel query --noshow_progress "$selection" 2> /dev/null) || {
  echo "sanitize: cannot list the test targets" >&2
  exit 1
}
# --symlink_prefix=/: no bazel-bin links, which would point the workspace's at this output base.
# shellcheck disable=SC2086
sbazel test --config=asan --symlink_prefix=/ --keep_going "$@" $targets
