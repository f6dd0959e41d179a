#!/bin/bash
# Builds the fedkit wheel for a Python interpreter against the torch 2.x installed in
# it: fedkit-<version>-cpXY-cpXY-linux_x86_64.whl, which `pip install` puts into any
# venv holding that same torch version (docs/other-libtorch.md).
#
#   tools/build_wheel.sh --python=/path/to/venv/bin/python [--out=DIR]   # DIR default: dist/
#
# The build is fedkit's Bazel build with LIBTORCH_PATH at that torch and FEDKIT_PYTHON
# at that interpreter (third_party/system_libs.bzl), in an output base of its own per
# interpreter, so a second wheel for the same Python only recompiles what changed.
# The first build compiles every plugin: about 20 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
python=""
out="dist"
for arg in "$@"; do
  case "$arg" in
    --python=*) python="${arg#--python=}" ;;
    --out=*) out="${arg#--out=}" ;;
    *) echo "build_wheel: unknown argument $arg (usage: --python=PY [--out=DIR])" >&2; exit 2 ;;
  esac
done
[[ -n "$python" ]] || { echo "build_wheel: --python=PY is required" >&2; exit 2; }
python="$(command -v "$python")" || { echo "build_wheel: $python not found" >&2; exit 2; }
info=$("$python" -c '
import os, sys, torch
print(os.path.dirname(torch.__file__))
print(torch.__version__)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("cp%d%d" % sys.version_info[:2])') || {
  echo "build_wheel: $python cannot import torch: install torch 2.x into it first" >&2
  exit 1
}
{ read -r torch_dir; read -r torch_version; read -r cxx11_abi; read -r tag; } <<< "$info"
if [[ "$torch_version" != 2.* ]]; then
  echo "build_wheel: $python has torch $torch_version; the wheel is for torch 2.x (Debian's 1.13 needs none: docs/python.md)" >&2
  exit 1
fi
if [[ "$cxx11_abi" != 1 ]]; then
  echo "build_wheel: torch $torch_version in $python uses the pre-C++11 ABI; Debian's libraries need the C++11 one" >&2
  exit 1
fi
base="$HOME/.cache/fedkit-wheel/$(echo "$(pwd -P) $python" | md5sum | cut -c1-12)"
echo "build_wheel: fedkit for $python ($tag, torch $torch_version from $torch_dir)"
flags=(--symlink_prefix=/ --repo_env=LIBTORCH_PATH="$torch_dir" --repo_env=FEDKIT_PYTHON="$python")
bazel --output_base="$base" build "${flags[@]}" //fl/python:wheel
bin=$(bazel --output_base="$base" info "${flags[@]}" bazel-bin 2> /dev/null)
mkdir -p "$out"
wheel=$(ls "$bin"/fl/python/fedkit-*-"$tag"-*.whl)
cp -f "$wheel" "$out/"
echo "wheel: $out/$(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
