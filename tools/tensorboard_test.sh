#!/bin/bash
# TensorBoard's own reader on fedkit's event files: the quickstart (on a slice of
# Fashion-MNIST), a run with diagnostics every round, evaluation every other
# round and rejected updates, and every run of a sweep (2 variants x 2 seeds)
# load with the numbers of their metrics.csv and diagnostics.csv
# (tools/tensorboard_check.py). A flipped byte fails TensorBoard's CRC check;
# output.tensorboard false writes no event file.
# TensorBoard comes from PyPI, into the virtual environment $FEDKIT_ORACLE_VENV
# (tools/setup.sh makes it; tools/test.sh passes its path): where it is missing
# the test says SKIPPED and why, and passes. Bazel runs this in the runfiles root.
set -uo pipefail

venv="${FEDKIT_ORACLE_VENV:-}"
if [[ -z "$venv" ]]; then
  echo "SKIPPED: FEDKIT_ORACLE_VENV is not set (tools/test.sh sets it to the environment tools/setup.sh makes)"
  exit 0
fi
if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  echo "SKIPPED: no tensorboard in $venv (tools/setup.sh installs it from PyPI; see its warning)"
  exit 0
fi
python="$venv/bin/python"
check="$PWD/tools/tensorboard_check.py"
run="$PWD/tools/run_experiment"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

slice='dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 3000 test_limit: 500 } } }'
one_thread='simulation { workers: 1 threads_per_worker: 1 }'
"$run" --spec="$PWD/experiments/quickstart.textproto" --output_dir="$tmp/quickstart" \
  --set="$slice server { rounds: 4 } device: CPU $one_thread" > "$tmp/quickstart.log" 2>&1 ||
  { fail "the quickstart failed"; tail -n 5 "$tmp/quickstart.log"; }
"$run" --spec="$PWD/tools/sweep/testdata/tiny.textproto" --output_dir="$tmp/fedexp" \
  --set='aggregator { name: "fedexp" } server { rounds: 5 eval_every: 2 } partition { num_clients: 8 }
         client { faults { kind: NAN_UPDATE fraction: 0.25 } } '"$one_thread" > "$tmp/fedexp.log" 2>&1 ||
  { fail "the FedExP run failed"; tail -n 5 "$tmp/fedexp.log"; }
grep -q "rejected_non_finite" "$tmp/fedexp/metrics.csv" || fail "the FedExP run rejected nothing"
"$PWD/tools/sweep/sweep" --sweep="$PWD/tools/sweep/testdata/example.sweep.textproto" \
  --out="$tmp/sweep" > "$tmp/sweep.log" 2>&1 || { fail "the sweep failed"; tail -n 5 "$tmp/sweep.log"; }

"$python" "$check" "$tmp/quickstart" "$tmp/fedexp" "$tmp"/sweep/*_seed[0-9] || fail "tensorboard_check"

cp -r "$tmp/fedexp" "$tmp/flipped"
"$python" - "$tmp/flipped/events.out.tfevents.fedkit" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 1
open(sys.argv[1], "wb").write(data)
PY
if "$python" "$check" "$tmp/flipped" > "$tmp/flipped.txt"; then
  fail "a flipped byte went unnoticed"
fi
grep -q "crc32 check" "$tmp/flipped.txt" || fail "a flipped byte: $(cat "$tmp/flipped.txt")"

"$run" --spec="$PWD/tools/sweep/testdata/tiny.textproto" --output_dir="$tmp/off" \
  --set="output { tensorboard: false } $one_thread" > "$tmp/off.log" 2>&1 || fail "the run without events failed"
[[ ! -e "$tmp/off/events.out.tfevents.fedkit" && -f "$tmp/off/metrics.csv" ]] ||
  fail "output { tensorboard: false } still wrote events (or no metrics.csv)"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
