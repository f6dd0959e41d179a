#!/bin/bash
# The option-coverage check (tools/option_coverage.py): first on small made-up
# trees, to see that it fails when it should; then on this repository. It reads
# the source tree, which Bazel does not track as inputs (hence tag "external":
# never cached). Bazel runs this in the runfiles root.
set -uo pipefail
script="$(readlink -f tools/option_coverage.py)"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

# tree DIR: a repository with one options message of three fields. Its test sets
# `covered` by a setter and `quoted` in a spec string; `commented` only in a
# comment and `in_error` only in an expected error message, which do not count.
tree() {
  mkdir -p "$1/fl" "$1/p" "$1/tools"
  echo 'syntax = "proto3"; package fedkit; message ExperimentSpec {}' > "$1/fl/spec.proto"
  cat > "$1/p/p_options.proto" <<'PROTO'
syntax = "proto3";
package fedkit.p;
message POptions {
  int32 covered = 1;
  int32 quoted = 2;
  int32 commented = 3;
  int32 in_error = 4;
}
PROTO
  cat > "$1/p/p_test.cc" <<'CC'
#include "p/p_options.pb.h"
// set_commented(1); commented: 1
void F(fedkit::p::POptions& options) {
  options.set_covered(1);
  Parse(R"pb(quoted: 2)pb");
  Expect("options.in_error: must be >= 0, got -1");
  Expect("median in_error: too large");
}
CC
  printf '%s\n' "$2" > "$1/tools/option_coverage_allowlist.txt"
}

# expect NAME CODE PATTERN DIR: the check on DIR exits CODE and prints PATTERN.
expect() {
  local out code
  out="$(python3 "$script" --root "$4" 2>&1)"
  code=$?
  if [[ $code -ne $2 ]] || ! grep -qF -- "$3" <<<"$out"; then
    echo "FAIL $1: exit $code (expected $2), output lacks \"$3\":"; echo "$out"
    failures=$((failures + 1))
  else
    echo "ok   $1"
  fi
}

tree "$tmp/exact" $'fedkit.p.POptions.commented only in a comment\nfedkit.p.POptions.in_error only in a message'
expect exact_list 0 "4 fields of 2 .proto files" "$tmp/exact"

tree "$tmp/unlisted" 'fedkit.p.POptions.commented only in a comment'
expect uncovered_and_unlisted 1 "fedkit.p.POptions.in_error  (p/p_options.proto)" "$tmp/unlisted"

tree "$tmp/stale" $'fedkit.p.POptions.commented only in a comment\nfedkit.p.POptions.in_error only in a message\nfedkit.p.POptions.quoted stale'
expect listed_but_covered 1 "fedkit.p.POptions.quoted is listed but p/p_test.cc sets it now" "$tmp/stale"

tree "$tmp/gone" $'fedkit.p.POptions.commented a\nfedkit.p.POptions.in_error b\nfedkit.p.POptions.renamed c'
expect listed_but_gone 1 "fedkit.p.POptions.renamed is listed but is no option field" "$tmp/gone"

tree "$tmp/no_reason" $'fedkit.p.POptions.commented\nfedkit.p.POptions.in_error b'
expect no_reason 1 "fedkit.p.POptions.commented has no reason" "$tmp/no_reason"

if [[ $failures -ne 0 ]]; then echo "$failures failure(s) of the check itself"; exit 1; fi
exec python3 "$script"
