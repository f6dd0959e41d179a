#!/bin/bash
# Measures what aggregation and simulation cost and writes a report:
#   bazel run -c opt //tools:bench_report -- [--out DIR] [--quick]
# DIR (default results/bench under the folder bazel was run from) gets report.md,
# aggregation_time.png and every raw measurement it was made from. --quick limits
# the aggregation benchmark to P <= 1.6M and the simulation runs to fewer rounds.
# Nothing else should run on the machine meanwhile: these are timings.
set -euo pipefail

out="${BUILD_WORKING_DIRECTORY:-$PWD}/results/bench"
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; [[ "$out" = /* ]] || out="${BUILD_WORKING_DIRECTORY:-$PWD}/$out"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "usage: bench_report [--out DIR] [--quick]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
runner=tools/run_experiment
baseline=tools/centralized_baseline
flute="$PWD/experiments/flute_lr.textproto"
rounds=100
[[ $quick -eq 1 ]] && rounds=20

echo "== aggregation cost (Google Benchmark)"
bench_args=(--benchmark_format=json --benchmark_out="$out/aggregation.json" --benchmark_out_format=json)
[[ $quick -eq 1 ]] && bench_args+=(--max_params=1600000)
aggregators/aggregation_benchmark "${bench_args[@]}" > /dev/null

# simulate NAME SET: a federated run of the FLUTE task with SET merged in, then the
# same number of optimiser steps as one centralised loop.
simulate() {
  local name="$1" set="$2"
  echo "== simulation: $name"
  "$runner" --spec="$flute" --output_dir="$out/$name" --set="server { rounds: $rounds eval_every: $rounds } $set" \
    > "$out/$name.log" 2>&1
  local steps
  steps=$(sed -nE 's/.*"local_steps": ([0-9]+).*/\1/p' "$out/$name/summary.json")
  "$baseline" --spec="$flute" --set="$set" --steps="$steps" > "$out/$name.centralized.json"
}
mlp='model { options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [200, 200] } } }'
simulate flute_lr ""
simulate flute_mlp "$mlp"

echo "== scale: registered clients vs memory"
for clients in 1000 10000; do
  "$runner" --spec="$flute" --output_dir="$out/scale_$clients" \
    --set="partition { num_clients: $clients } server { rounds: 5 clients_per_round: 100 eval_every: 5 }" \
    > "$out/scale_$clients.log" 2>&1
done

{
  echo "cores: $(nproc)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
  echo "libtorch: $(dpkg-query -W -f='${Package} ${Version}' libtorch-dev 2>/dev/null || echo "${LIBTORCH_PATH:-unknown}")"
  echo "blas: $(update-alternatives --query "libblas.so.3-$(gcc -print-multiarch)" 2>/dev/null | sed -n 's/^Value: //p')"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
} > "$out/machine.txt"

py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
"$py" tools/bench_report.py "$out"
echo "report: $out/report.md"
