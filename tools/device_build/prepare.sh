#!/bin/bash
# Makes a bundle that builds fedkit on a machine without Bazel (a GPU box with
# its own LibTorch, compiler and ninja), from Bazel's own action graph so that
# it cannot drift from the Bazel build:
#   tools/device_build/prepare.sh OUT_DIR [TARGET...]
# Default targets: the runner, the aggregation benchmark and every cc_test that
# touches models, training, aggregation or evaluation (fl, aggregators, models,
# data, the end-to-end test). OUT_DIR/fedkit-bundle.tar.gz then holds:
#   the source tree (git HEAD, without the committed results), build.ninja made
#   from `bazel aquery` of those targets (tools/device_build/ninja_from_aquery.py),
#   the protoc outputs the compiles read (gen/), Debian 12's .deb files for the
#   libraries and the Fashion-MNIST dataset (debs/), and build.sh, which unpacks
#   the .debs into a prefix and runs ninja against the machine's LibTorch.
# Needs this machine's Bazel and network access to the Debian archive (apt-get
# download). The bundle is about 45 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: prepare.sh OUT_DIR [TARGET...]}"
shift
mkdir -p "$out"
out="$(cd "$out" && pwd)"
if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(bazel query 'kind("cc_test", //fl/... + //aggregators/... + //models/... + //data/...) + //experiments:end_to_end_test' 2> /dev/null)
  targets+=(//tools:run_experiment //aggregators:aggregation_benchmark)
fi
echo "== building ${#targets[@]} targets with Bazel"
# Statically linked tests, like the binaries: no shared-library tree to carry.
bazel build --dynamic_mode=off "${targets[@]}" 2>&1 | tail -1

stage="$(mktemp -d)/fedkit"
mkdir -p "$stage"
git archive HEAD -- . ':!experiments/*/results' ':!experiments/bench_results' | tar -x -C "$stage"

echo "== the action graph"
query="$(printf 'deps(%s) + ' "${targets[@]}")"
bazel aquery --dynamic_mode=off "mnemonic(\"CppCompile|CppLink\", ${query% + })" --output=jsonproto \
  --include_param_files 2> /dev/null > "$stage/aquery.json"
python3 tools/device_build/ninja_from_aquery.py "$stage/aquery.json" "$stage/generated.txt" \
  "$stage/build.ninja"
rm "$stage/aquery.json"
while read -r file; do
  mkdir -p "$stage/gen/$(dirname "$file")"
  cp "bazel-bin/$file" "$stage/gen/$file"
done < "$stage/generated.txt"
cp tools/device_build/build.sh "$stage/build.sh"

echo "== Debian 12 packages"
mkdir -p "$stage/debs"
(cd "$stage/debs" && apt-get download -qq \
  libabsl-dev libabsl20220623 libgoogle-glog-dev libgoogle-glog0v6 libgflags-dev libgflags2.2 \
  libunwind-dev libunwind8 libprotobuf-dev libprotobuf32 libprotobuf-lite32 googletest \
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian zlib1g-dev liblemon-dev \
  liblemon1.3.1 libalglib-dev libalglib3.19 libgloo-dev dataset-fashion-mnist 2>&1 | grep -v "^W:" || true)

tar -C "$(dirname "$stage")" -czf "$out/fedkit-bundle.tar.gz" fedkit
rm -rf "$(dirname "$stage")"
echo "bundle: $out/fedkit-bundle.tar.gz ($(du -h "$out/fedkit-bundle.tar.gz" | cut -f1))"
