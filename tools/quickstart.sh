#!/bin/bash
# The README's quickstart command: set-up (a no-op when done), then FedAvg on
# Fashion-MNIST. Results go to results/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
exec bazel run //experiments:quickstart -- "$@"
