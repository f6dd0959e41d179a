#!/bin/bash
# The peers' virtual environment for tools/peers/compare.py: Flower (simulation
# extra, with Ray) from PyPI, pinned, on Debian's python3-torch (the same LibTorch
# 1.13 and OpenBLAS fedkit builds against, so the arithmetic libraries match).
# Never the system Python: the environment sees Debian's packages and adds its own.
# Not part of the build or the test suite. Re-running it is a no-op once installed.
#   tools/peers/setup.sh [VENV]      (default ~/.cache/fedkit-peers/venv)
set -euo pipefail
venv="${1:-$HOME/.cache/fedkit-peers/venv}"
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "peers/setup: Debian's python3-torch is missing; run tools/setup.sh first" >&2
  exit 1
}
command -v taskset > /dev/null || {
  echo "peers/setup: taskset is missing (Debian's util-linux)" >&2
  exit 1
}
if [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# numpy below 2: Debian's torch 1.13 was built against numpy 1.x.
"$venv/bin/pip" install --quiet "flwr[simulation]==1.42.0" "ray==2.55.1" "numpy>=1.26,<2"
"$venv/bin/python" -c "import flwr, ray, torch; print('flwr', flwr.__version__, 'ray', ray.__version__, 'torch', torch.__version__)"
