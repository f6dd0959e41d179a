#!/bin/bash
# Packs what the GPU check runs into one archive, built here so that the GPU machine
# compiles nothing: fedkit's binaries linked against PyTorch 2.11.0 (--config=torch2,
# with its CUDA libraries: --config=cuda), statically but for the system's and torch's
# libraries; the other shared libraries they need (Debian's Abseil, glog, Protobuf,
# gRPC, ...; tools/elf_deps.py); Fashion-MNIST; the specs; the check script and its
# Python helpers; and a fedkit wheel for the GPU machine's Python when one is given.
# On the GPU machine torch's libraries come from its own torch 2.11.0.
#
#   tools/device_build/pack.sh OUT_DIR [--cpu] [--wheel=fedkit-...whl]
#     --cpu: link CPU-only (no CUDA wheels needed here): the archive for the CPU dry
#            run (tools/test_torch2.sh), which must behave as the GPU one does.
#   -> OUT_DIR/fedkit-gpu.tar.xz; there:
#      tar -xJf fedkit-gpu.tar.xz && fedkit-gpu/tools/device_build/gpu_check.sh --out=DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:?usage: pack.sh OUT_DIR [--cpu] [--wheel=WHEEL]}"
shift
cuda=(--config=cuda)
wheel=""
for arg in "$@"; do
  case "$arg" in
    --cpu) cuda=() ;;
    --wheel=*) wheel="$(realpath "${arg#--wheel=}")" ;;
    *) echo "pack.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
tools/setup_torch2.sh
base="$(tools/test_torch2.sh --output_base)"
tbazel() { bazel --output_base="$base" "$@"; }
targets=(//tools:run_experiment //tools:local_step_benchmark //fl:device_test //fl:device_parity_test)
flags=(--config=torch2 "${cuda[@]}" --dynamic_mode=off --symlink_prefix=/)
echo "== building ${targets[*]} (${flags[*]})"
tbazel build "${flags[@]}" "${targets[@]}" 2>&1 | tail -n 2
bin="$(tbazel info "${flags[@]}" bazel-bin 2> /dev/null)"

stage="$(mktemp -d)/fedkit-gpu"
mkdir -p "$stage/bin" "$stage/lib" "$stage/data/fashion-mnist" "$stage/experiments/gpu" \
  "$stage/tools/device_build" "$stage/wheels"
for target in "${targets[@]}"; do
  path="${target#//}"
  cp "$bin/${path/://}" "$stage/bin/"
done
chmod u+w "$stage"/bin/*
strip --strip-debug "$stage"/bin/*
# Each under the name the binaries ask for (its soname).
python3 tools/elf_deps.py "$stage"/bin/* | while read -r soname path; do
  cp "$path" "$stage/lib/$soname"
done
cp /usr/share/datasets/fashion-mnist/*.gz "$stage/data/fashion-mnist/"
cp experiments/quickstart.textproto "$stage/experiments/"
cp experiments/gpu/*.textproto "$stage/experiments/gpu/"
cp tools/device_build/gpu_check.sh tools/device_build/eager_peer.py \
  tools/device_build/synthetic_cifar.py tools/device_build/summarize.py "$stage/tools/device_build/"
[[ -z "$wheel" ]] || cp "$wheel" "$stage/wheels/"
{
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%FT%TZ) with --config=torch2 ${cuda[*]:-(CPU-only link)}"
  echo "torch: $(tools/setup_torch2.sh --print)"
  echo "newest GLIBC and GLIBCXX needed:"
  objdump -T "$stage"/bin/* "$stage"/lib/* | grep -oE 'GLIBC(XX)?_[0-9.]+' | sort -uV | \
    awk -F_ '{v[$1]=$0} END {for (k in v) print "  " v[k]}'
} > "$stage/MANIFEST"
tar -C "$(dirname "$stage")" -cJf "$out/fedkit-gpu.tar.xz" fedkit-gpu
rm -rf "$(dirname "$stage")"
echo "archive: $out/fedkit-gpu.tar.xz ($(du -h "$out/fedkit-gpu.tar.xz" | cut -f1))"
