#!/bin/bash
# tools/setup.sh as a non-root user on a machine where everything is installed but
# BLAS points at the reference library: the one system change left (switching the
# alternative to OpenBLAS) must go through sudo. The system commands are stubs that
# log their calls; update-alternatives --set fails unless sudo ran it.
set -euo pipefail

setup="$TEST_SRCDIR/$TEST_WORKSPACE/tools/setup.sh"
stubs="$TEST_TMPDIR/stubs"
log="$TEST_TMPDIR/calls.log"
mkdir -p "$stubs"
: >"$log"

stub() {  # name, body
  printf '#!/bin/bash\n%s\n' "$2" >"$stubs/$1"
  chmod +x "$stubs/$1"
}
stub id 'if [[ "${1:-}" == -u ]]; then echo "${AS_ROOT:-1000}"; else /usr/bin/id "$@"; fi'
stub sudo "echo \"sudo \$*\" >>'$log'; AS_ROOT=0 exec \"\$@\""
stub dpkg-query 'echo "install ok installed"'
stub gcc 'echo x86_64-linux-gnu'
stub update-alternatives "echo \"update-alternatives \$* (uid \${AS_ROOT:-1000})\" >>'$log'
case \"\$1\" in
  --query) echo 'Value: /usr/lib/x86_64-linux-gnu/blas/libblas.so.3' ;;
  --list) echo /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ;;
  --set) [[ \"\${AS_ROOT:-1000}\" == 0 ]] || { echo 'update-alternatives: permission denied' >&2; exit 2; } ;;
esac"
stub apt-get "echo \"apt-get \$*\" >>'$log'; exit 1"

data="$TEST_TMPDIR/data"
mkdir -p "$data/mnist"
touch "$data/mnist/"{train,t10k}-{images-idx3,labels-idx1}-ubyte

# The test oracles' environment is there too (a python that imports anything).
venv="$TEST_TMPDIR/oracle-venv"
mkdir -p "$venv/bin"
printf '#!/bin/bash\necho "oracle python $*" >>%q\n' "$log" >"$venv/bin/python"
chmod +x "$venv/bin/python"

if ! PATH="$stubs:/usr/bin:/bin" FEDKIT_DATA_DIR="$data" FEDKIT_ORACLE_VENV="$venv" bash "$setup"; then
  echo "FAIL: setup.sh failed as a non-root user; calls:" >&2
  cat "$log" >&2
  exit 1
fi
if ! grep -q '^update-alternatives --set .*openblas.* (uid 0)$' "$log"; then
  echo "FAIL: the BLAS alternative was not switched as root; calls:" >&2
  cat "$log" >&2
  exit 1
fi
if grep -q '^apt-get' "$log"; then
  echo "FAIL: nothing is missing, yet apt-get ran" >&2
  exit 1
fi
if ! grep -q '^oracle python -c import tensorboard$' "$log" || grep -q 'pip\|venv' "$log"; then
  echo "FAIL: the oracles' environment was not probed, or was made again; calls:" >&2
  cat "$log" >&2
  exit 1
fi
echo "PASS"
