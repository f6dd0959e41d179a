#!/bin/bash
# What the side-by-side tools need beyond tools/setup.sh: Debian's Python twin of
# LibTorch 1.13 and torchvision, to run official repositories' code on the CPU.
# Not part of the build or the test suite. A no-op when they are installed.
set -euo pipefail
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
missing=()
for p in python3-torch python3-torchvision; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian's interpreter: the packages live in its dist-packages.
/usr/bin/python3 -c "import torch, torchvision" || {
  echo "side_by_side/setup: /usr/bin/python3 cannot import torch and torchvision" >&2
  exit 1
}
