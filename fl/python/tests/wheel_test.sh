#!/bin/bash
# The wheel from a user's side: a fresh virtual environment that holds the build's
# torch (Debian's through the system site-packages, or torch2's venv through a .pth
# file: no download), `pip install` of fedkit's wheel with no index (so its torch
# requirement must be met by that torch), then the package's own pytest suites run
# against the installed package from a folder without fedkit's sources. Checks too
# that the wheel carries no torch library and needs nothing from the build tree.
#   wheel_test.sh PYTHON PYTHON_SITE WHEEL
set -euo pipefail
python="$1"
site="$2"
wheel="$(realpath "$3")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
venv="$tmp/venv"

fail() { echo "FAIL: $*" >&2; exit 1; }

if [[ -z "$site" ]]; then
  "$python" -m venv --system-site-packages "$venv"
else
  "$python" -m venv "$venv"
  purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$purelib/build_torch.pth"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-cache-dir "$wheel" ||
  fail "pip install $wheel into a venv holding the build's torch"

installed=$("$venv/bin/python" -c 'import os, fedkit; print(os.path.dirname(fedkit.__file__))')
[[ "$installed" == "$venv"/* ]] || fail "import fedkit found $installed, not the installed package"
echo "fedkit installed at $installed"
if ls "$installed/_libs" 2>/dev/null | grep -E '^lib(torch|c10)'; then
  fail "the wheel carries torch's own libraries"
fi
missing=$(env -u LD_LIBRARY_PATH ldd "$installed/_fedkit.so" | grep "not found" || true)
[[ -z "$missing" ]] || fail "_fedkit.so needs libraries the venv lacks: $missing"
rpath=$(patchelf --print-rpath "$installed/_fedkit.so")
[[ "$rpath" == '$ORIGIN/_libs:$ORIGIN/../torch/lib' ]] || fail "_fedkit.so's RPATH is $rpath"

# The tests read their specs and plugins relative to the current folder, as under Bazel.
work="$tmp/work"
mkdir -p "$work/fl/python/tests" "$work/fl/python/examples" "$work/experiments"
cp fl/python/tests/fedkit_test.py fl/python/tests/python_plugins_test.py fl/python/tests/small.textproto \
  "$work/fl/python/tests/"
cp fl/python/examples/*.py "$work/fl/python/examples/"
cp experiments/quickstart.textproto "$work/experiments/"
cd "$work"
PYTHONPATH="$work/fl/python/examples" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  fl/python/tests/fedkit_test.py fl/python/tests/python_plugins_test.py
