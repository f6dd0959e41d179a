#!/bin/bash
# ninja_from_aquery.py on a hand-made action graph: one binary from two compiles
# (a source and a protoc output), plus a shared library and a PIC object nothing
# links into a binary. Bazel runs this in the runfiles root.
set -uo pipefail
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
python3 tools/device_build/ninja_from_aquery.py tools/device_build/testdata/aquery.json \
  "$tmp/generated.txt" "$tmp/build.ninja" > "$tmp/out.txt" || { fail "exit $?"; cat "$tmp/out.txt"; }
ninja="$tmp/build.ninja"
grep -qx "2 compiles, 1 links, 2 generated sources" "$tmp/out.txt" || fail "counts: $(cat "$tmp/out.txt")"
# The protoc output and its header, read from gen/.
[[ "$(cat "$tmp/generated.txt")" == $'fl/spec.pb.cc\nfl/spec.pb.h' ]] || fail "generated: $(cat "$tmp/generated.txt")"
grep -q "^build obj/fl/_objs/server/server.o: compile fl/server.cc$" "$ninja" || fail "server.o edge"
grep -q "^build obj/fl/_objs/spec_proto/spec.pb.o: compile gen/fl/spec.pb.cc$" "$ninja" || fail "spec.pb.o edge"
grep -q "^  depfile = obj/fl/_objs/server/server.d$" "$ninja" || fail "depfile"
server="$(grep -A1 '^build obj/fl/_objs/server/server.o' "$ninja" | tail -1)"
for want in '$cxx ' '-MF obj/fl/_objs/server/server.d' '-frandom-seed=obj/fl/_objs/server/server.o' \
    '-iquote gen' '$torch_include_flags' "'-D__DATE__=\"redacted\"'" '$prefix_include_flags'; do
  [[ "$server" == *"$want"* ]] || fail "compile lacks $want: $server"
done
for unwanted in 'external/' '/usr/bin/gcc' 'bazel-out'; do
  [[ "$server" != *"$unwanted"* ]] || fail "compile still names $unwanted: $server"
done
link="$(grep -A1 '^build bin/tools/run_experiment' "$ninja" | tail -1)"
grep -q "^build bin/tools/run_experiment: link obj/fl/_objs/server/server.o obj/fl/_objs/spec_proto/spec.pb.o$" \
  "$ninja" || fail "link edge"
for want in '-o bin/tools/run_experiment' '$prefix_lib_flags $torch_lib_flags' '-ltorch' '-lglog'; do
  [[ "$link" == *"$want"* ]] || fail "link lacks $want: $link"
done
for unwanted in 'gold' 'start-lib' 'end-lib' '-B/usr/bin' '.params' '/usr/lib/x86_64-linux-gnu'; do
  [[ "$link" != *"$unwanted"* ]] || fail "link still has $unwanted: $link"
done
grep -q "libserver.so\|unused" "$ninja" && fail "a library or an unused object was kept"
grep -q "^build all: phony bin/tools/run_experiment$" "$ninja" || fail "no all target"
[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo PASS
