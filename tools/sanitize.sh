#!/bin/bash
# The sanitizer half of the test suite (tools/test.sh runs it after the main half):
# the unit tests of fl/ and data/, and every fuzz target (tag "fuzz") as real
# libFuzzer for its bounded number of executions, built with clang-15 under
# AddressSanitizer and UndefinedBehaviorSanitizer (--config=asan in .bazelrc).
# It builds in a Bazel output base of its own, so that switching compilers does
# not throw away the gcc build's cache.
#
#   tools/sanitize.sh [more bazel test flags]
# Ends with the same "Executed ..." summary as bazel test.
set -uo pipefail
cd "$(dirname "$0")/.."
# One output base per checkout, as Bazel's own is.
base="${FEDKIT_SANITIZER_OUTPUT_BASE:-$HOME/.cache/fedkit-sanitizer/$(pwd -P | md5sum | cut -c1-12)}"
sbazel() { bazel --output_base="$base" "$@"; }
# The top-level folders by name, not //...: that would also walk the gcc build's
# bazel-* links, which this output base does not know as its own.
everything="//fl/... + //models/... + //data/... + //aggregators/... + //experiments/... + //tools/..."
targets=$(sbazel query --noshow_progress \
  "tests(//fl/... + //data/...) + attr(tags, '\bfuzz\b', tests($everything))" 2> /dev/null) || {
  echo "sanitize: cannot list the test targets" >&2
  exit 1
}
# --symlink_prefix=/: no bazel-bin links, which would point the workspace's at this output base.
# shellcheck disable=SC2086
sbazel test --config=asan --symlink_prefix=/ --keep_going "$@" $targets
