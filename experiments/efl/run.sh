#!/bin/bash
# EFL's reproductions at a CPU size, on experiments/efl/fmnist_mlp_shards.textproto
# (and the same on the MNIST subset); tables and plots by tables.py.
#   experiments/efl/run.sh [ROUNDS]          everything, seeds 1 2 3 (default 100 rounds)
#   SEEDS="1" PARTS="lambda" experiments/efl/run.sh 5
# Parts (results under experiments/efl/results/<part>/<run>_seed<S>/):
#   lambda       FedAvg, FedProx (mu 0.01) and EFL with lambda 0, 0.01, 0.1, 1, on
#                Fashion-MNIST and the MNIST subset (the paper's Fig. 2 / Table 2)
#   stragglers   a straggler fraction of 0, 0.3, 0.6 (each straggler completes s of
#                its E steps, s uniform): FedAvg dropping stragglers, FedAvg keeping
#                them as they are, EFL (lambda 0.1) scaling them by E / s (Fig. 3)
#   compression  EFL (lambda 0.1) with sparse ternary compression both ways, q 1 (none),
#                0.1 and 0.01, with and without error feedback: accuracy against
#                megabytes sent
# A run whose summary.json exists is skipped (delete its folder to redo it). Runs go
# two at a time, one worker and one thread each.
set -euo pipefail
cd "$(dirname "$0")/../.."
export ROUNDS="${1:-100}"
export OUT="${OUT:-experiments/efl/results}"
bazel build -c opt //tools:run_experiment
# A private copy, so rebuilding the tree while this runs does not swap the binary.
export BIN="$(mktemp -d)/run_experiment"
cp bazel-bin/tools/run_experiment "$BIN"

run_one() {  # run_one DIR SET
  local dir="$1" set="$2"
  if [[ -f "$dir/summary.json" ]]; then
    echo "kept $dir"
    return 0
  fi
  mkdir -p "$(dirname "$dir")"
  if "$BIN" --spec=experiments/efl/fmnist_mlp_shards.textproto --output_dir="$dir" \
      --set="server { rounds: $ROUNDS } $set simulation { workers: 1 threads_per_worker: 1 }" \
      > "$dir.log" 2>&1; then
    echo "done $dir"
  else
    echo "FAILED $dir (see $dir.log)"
  fi
}
export -f run_one

efl() {  # efl LAMBDA
  echo "aggregator { name: \"efl\" options { [type.googleapis.com/fedkit.aggregators.EflOptions] { client { lambda: $1 } } } }"
}
fedprox='aggregator { name: "fedprox" options { [type.googleapis.com/fedkit.aggregators.FedProxOptions] { mu: 0.01 } } }'
fedavg='aggregator { name: "fedavg" options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1 } } }'
mnist='dataset { name: "mnist" }'

for seed in ${SEEDS:-1 2 3}; do
  for part in ${PARTS:-lambda stragglers compression}; do
    case "$part" in
      lambda)
        for data in fmnist mnist; do
          dataset=""
          [[ "$data" == mnist ]] && dataset="$mnist"
          echo "$OUT/lambda/${data}_fedavg_seed$seed|seed: $seed $dataset $fedavg"
          echo "$OUT/lambda/${data}_fedprox_seed$seed|seed: $seed $dataset $fedprox"
          for lambda in 0 0.01 0.1 1; do
            echo "$OUT/lambda/${data}_efl_l${lambda}_seed$seed|seed: $seed $dataset $(efl "$lambda")"
          done
        done
        ;;
      stragglers)
        for fraction in 0 0.3 0.6; do
          system="client { system { straggler_fraction: $fraction } }"
          echo "$OUT/stragglers/fedavg_drop_f${fraction}_seed$seed|seed: $seed $system server { incomplete_updates: DROP } $fedavg"
          echo "$OUT/stragglers/fedavg_keep_f${fraction}_seed$seed|seed: $seed $system server { incomplete_updates: KEEP } $fedavg"
          echo "$OUT/stragglers/efl_scale_f${fraction}_seed$seed|seed: $seed $system server { incomplete_updates: SCALE } $(efl 0.1)"
        done
        ;;
      compression)
        echo "$OUT/compression/efl_q1_seed$seed|seed: $seed $(efl 0.1)"
        for q in 0.1 0.01; do
          for ef in true false; do
            codec="kind: SPARSE_TERNARY fraction: $q error_feedback: $ef"
            echo "$OUT/compression/efl_q${q}_ef${ef}_seed$seed|seed: $seed client { upload { $codec } } server { download { $codec } } $(efl 0.1)"
          done
        done
        ;;
      *) echo "unknown part $part" >&2; exit 2 ;;
    esac
  done
done | xargs -P "${JOBS:-2}" -d '\n' -I{} bash -c 'line="$1"; run_one "${line%%|*}" "${line#*|}"' _ {}

py=/usr/bin/python3  # Debian's, where python3-matplotlib installs
[[ -x "$py" ]] || py=python3
"$py" experiments/efl/tables.py "$OUT"
