#!/bin/bash
# Runs an Elastic Aggregation comparison over seeds, two runs at a time with one
# worker and one thread each, then writes table.md and the accuracy curves.
#   experiments/elastic/run.sh SETTING [ROUNDS]
# SETTING is a spec in this folder: fmnist_mlp (FedAvg vs Elastic paper mode,
# paper mode with B_k = one batch, and FL-bench-like mode), logreg_fmnist /
# logreg_mnist (naive vs elastic, the paper's unbalanced logistic-regression row).
# Every setting also runs FedAvg with server steps 1.25 and 1.5: the control that
# tells Elastic's interpolation from a larger server step.
#   METHODS="fedavg elastic" SEEDS="1" experiments/elastic/run.sh fmnist_mlp 20
# Results: experiments/elastic/results/SETTING/<method>_seed<S>/, table.md, *.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
export SETTING="$1"
export ROUNDS="${2:-}"
export OUT="experiments/elastic/results/$SETTING"
mkdir -p "$OUT"
bazel build //tools:run_experiment
# A private copy, so rebuilding the tree while this runs does not swap the binary.
export BIN="$(mktemp -d)/run_experiment"
cp bazel-bin/tools/run_experiment "$BIN"

run_one() {
  local method="$1" seed="$2" aggregator rounds=""
  case "$method" in
    fedavg) aggregator='name: "fedavg" options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1 } }' ;;
    fedavg_lr1.25) aggregator='name: "fedavg" options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1.25 } }' ;;
    fedavg_lr1.5) aggregator='name: "fedavg" options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1.5 } }' ;;
    elastic) aggregator='name: "elastic" options { [type.googleapis.com/fedkit.aggregators.ElasticOptions] { mode: PAPER } }' ;;
    # B_k = one mini-batch instead of 30 % of the client's data (docs/elastic.md, section 4.2).
    elastic_1batch) aggregator='name: "elastic" options { [type.googleapis.com/fedkit.aggregators.ElasticOptions] { mode: PAPER sensitivity { holdout_batches: 1 } } }' ;;
    elastic_flbench) aggregator='name: "elastic" options { [type.googleapis.com/fedkit.aggregators.ElasticOptions] { mode: FLBENCH } }' ;;
    *) echo "unknown method $method"; return 1 ;;
  esac
  [[ -n "$ROUNDS" ]] && rounds="server { rounds: $ROUNDS }"
  local dir="$OUT/${method}_seed${seed}"
  if "$BIN" --spec="experiments/elastic/$SETTING.textproto" --output_dir="$dir" \
      --set="seed: $seed $rounds aggregator { $aggregator } simulation { workers: 1 threads_per_worker: 1 }" \
      > "$dir.log" 2>&1; then
    echo "done $method seed $seed"
  else
    echo "FAILED $method seed $seed (see $dir.log)"
  fi
}
export -f run_one

default_methods="fedavg fedavg_lr1.25 fedavg_lr1.5 elastic elastic_1batch elastic_flbench"
[[ "$SETTING" == logreg_* ]] && default_methods="fedavg fedavg_lr1.25 fedavg_lr1.5 elastic"
for seed in ${SEEDS:-1 2 3}; do
  for method in ${METHODS:-$default_methods}; do
    echo "$method $seed"
  done
done | xargs -P "${PARALLEL:-2}" -L 1 bash -c 'run_one "$0" "$1"'

py=/usr/bin/python3  # Debian's, where python3-matplotlib installs
[[ -x "$py" ]] || py=python3
"$py" experiments/elastic/table.py "$OUT"
