#!/bin/bash
# Builds fedkit from a bundle made by tools/device_build/prepare.sh, without
# Bazel: unpacks the carried Debian libraries into prefix/, writes vars.ninja
# for this machine's LibTorch and compiler, and runs ninja; binaries land in bin/
# (e.g. bin/tools/run_experiment, bin/fl/server_test). Run it in the bundle:
#   ./build.sh [--torch=DIR] [--jobs=N]
# DIR is a LibTorch folder (include/ and lib/, e.g. Python's torch package:
# python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))', the
# default when Python's torch is importable) or /usr for Debian's libtorch-dev. A
# LibTorch with libtorch_cuda.so is linked with its CUDA libraries (kept with
# --no-as-needed, since nothing names their symbols). CXX picks the compiler
# (default g++). Needs dpkg-deb and ninja.
set -euo pipefail
root="$(cd "$(dirname "$0")" && pwd)"
cd "$root"
torch=""
jobs="$(nproc)"
for arg in "$@"; do
  case "$arg" in
    --torch=*) torch="${arg#*=}" ;;
    --jobs=*) jobs="${arg#*=}" ;;
    *) echo "usage: build.sh [--torch=DIR] [--jobs=N]" >&2; exit 2 ;;
  esac
done
if [[ -z "$torch" ]]; then
  torch="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2> /dev/null)" || {
    echo "no --torch given and Python's torch is not importable" >&2; exit 2; }
fi
if [[ "$torch" == /usr ]]; then
  multiarch="$(gcc -print-multiarch)"
  torch_lib="/usr/lib/$multiarch"
  # /usr/include is already the compiler's; naming it again breaks #include_next.
  torch_include_flags="-isystem /usr/include/torch/csrc/api/include"
else
  torch_lib="$torch/lib"
  torch_include_flags="-isystem $torch/include/torch/csrc/api/include -isystem $torch/include"
fi
[[ -e "$torch_lib/libtorch.so" || -e "$torch_lib/libtorch.so.1" ]] ||
  ls "$torch_lib"/libtorch.so* > /dev/null 2>&1 || { echo "no libtorch.so in $torch_lib" >&2; exit 2; }
torch_lib_flags="-L$torch_lib -Wl,-rpath,$torch_lib"
if [[ -e "$torch_lib/libtorch_cuda.so" ]]; then
  torch_lib_flags+=" -Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed"
  echo "LibTorch in $torch has CUDA: linking torch_cuda and c10_cuda"
fi

prefix="$root/prefix"
if [[ ! -d "$prefix/usr/include/absl" ]]; then
  for deb in debs/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
fi
libdir="$prefix/usr/lib/$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)"
# An RPATH (not RUNPATH) also serves the carried libraries' own dependencies
# (glog's gflags and libunwind), which the system may lack.
cat > vars.ninja <<VARS
cxx = ${CXX:-g++}
torch_include_flags = $torch_include_flags
prefix_include_flags = -isystem $prefix/usr/include
torch_lib_flags = $torch_lib_flags
prefix_lib_flags = -Wl,--disable-new-dtags -L$libdir -Wl,-rpath,$libdir
VARS
mkdir -p obj bin
# NINJA_TARGETS (space-separated, e.g. "bin/tools/run_experiment") builds only those.
ninja -j "$jobs" ${NINJA_TARGETS:-all}
echo "built: $(find bin -type f -perm -u+x | wc -l) binaries under $root/bin"
