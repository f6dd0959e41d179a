#!/bin/bash
# Fetches the second LibTorch configuration, PyTorch 2.11.0 from PyPI (pinned), into
# a cache folder, once: a virtual environment of Debian's /usr/bin/python3 holding
# torch==2.11.0 (its C++ headers and libraries under torch/include and torch/lib,
# with the CUDA 13 libraries it links) and what the Python tests need (pytest,
# pandas, pybind11, wheel). Never touches the system Python.
#   tools/setup_torch2.sh                  # set up if missing, print nothing else on success
#   tools/setup_torch2.sh --print          # ... then print the torch folder (for LIBTORCH_PATH)
#   tools/setup_torch2.sh --print-python   # ... then print the venv's python
# The folder is $FEDKIT_TORCH2_DIR, else ~/.cache/fedkit/torch-2.11.0; `bazel
# --config=torch2` finds it there (third_party/system_libs.bzl), and `torch` in it
# links to the venv's torch package. About 2.5 GB is downloaded the first time
# (the wheel is 530 MB, CUDA's wheels the rest), 4.5 GB on disk.
set -euo pipefail

version=2.11.0
dir=$(realpath -m "${FEDKIT_TORCH2_DIR:-$HOME/.cache/fedkit/torch-$version}")
python=/usr/bin/python3
venv="$dir/venv"

installed() {
  [[ -x "$venv/bin/python" ]] &&
    [[ "$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null)" == "$version"* ]] &&
    "$venv/bin/python" -c 'import pytest, pybind11, wheel, pandas' 2>/dev/null &&
    [[ -e "$dir/torch/include/torch/csrc/api/include/torch/torch.h" ]]
}

if ! installed; then
  if [[ ! -x "$python" ]] || ! "$python" -c 'import ensurepip' 2>/dev/null; then
    echo "setup_torch2: $python with venv support is needed (tools/setup.sh installs python3-venv)" >&2
    exit 1
  fi
  echo "setup_torch2: installing torch==$version from PyPI into $venv"
  rm -rf "$venv" "$dir/torch"
  mkdir -p "$dir"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "torch==$version" "pybind11==3.0.1" "pytest==8.3.4" "wheel==0.45.1" "numpy==2.2.6" "pandas==2.2.3"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  ln -sfn "$site/torch" "$dir/torch"
  if ! installed; then
    echo "setup_torch2: torch==$version did not install into $venv" >&2
    exit 1
  fi
fi
case "${1:-}" in
  --print) realpath "$dir/torch" ;;
  --print-python) echo "$venv/bin/python" ;;
esac
