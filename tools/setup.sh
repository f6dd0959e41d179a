#!/bin/bash
# Installs what fedkit needs on Debian 12, once: Bazel 4.2.3 and its offline tool
# repositories, LibTorch (CPU) with OpenBLAS, Abseil, glog, Protobuf, GoogleTest,
# Google Benchmark, zlib and the Fashion-MNIST dataset. Each part is skipped when
# it is already there, so running this again is a no-op.
set -euo pipefail

packages=(
  bazel-bootstrap            # Bazel 4.2.3
  bazel-bootstrap-source     # offline stand-ins for Bazel's tool repositories
  g++
  pkg-config
  libtorch-dev               # LibTorch 1.13 (CPU)
  libopenblas0-pthread       # fast BLAS under LibTorch's matmuls
  libabsl-dev
  libgoogle-glog-dev
  libprotobuf-dev
  protobuf-compiler
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  zlib1g-dev
  dataset-fashion-mnist      # real Fashion-MNIST, IDX gzip files
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch must not run on reference BLAS (13x slower matmuls here).
blas_alt=libblas.so.3-$(gcc -print-multiarch)
if update-alternatives --query "$blas_alt" >/dev/null 2>&1; then
  current=$(update-alternatives --query "$blas_alt" | awk '/^Value:/ {print $2}')
  if [[ "$current" != *openblas* ]]; then
    best=$(update-alternatives --list "$blas_alt" | grep openblas | head -n 1 || true)
    if [[ -n "$best" ]]; then
      echo "setup: pointing $blas_alt at $best"
      update-alternatives --set "$blas_alt" "$best"
    else
      echo "setup: warning: no OpenBLAS alternative for $blas_alt; LibTorch may use reference BLAS" >&2
    fi
  fi
fi
