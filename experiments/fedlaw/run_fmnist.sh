#!/bin/bash
# Runs the Fashion-MNIST rows of FedLAW's Table 3 (MLP, 20 clients, E = 3, Dirichlet
# alpha 100 and 0.1): FedAvg, FedLAW, Server-FT and FedDF (and optionally FedLAW's
# SWA variant) over seeds, two runs at a time with one worker and one thread each,
# then writes the table and plots.
#   experiments/fedlaw/run_fmnist.sh [ROUNDS]        (default 200)
#   METHODS="fedlaw fedavg" ALPHAS="0.1" SEEDS="1" experiments/fedlaw/run_fmnist.sh 3   (a subset)
#   SETTINGS=paper experiments/fedlaw/run_fmnist.sh  (the paper's Appendix B/D settings)
# A run whose summary.json exists is skipped, so an interrupted sweep resumes
# where it stopped and more seeds can be added later (delete a run's folder to redo it).
# SETTINGS=code (default) uses the official code's defaults: a 200-image proxy set,
# Es = 20 for every server method, SGD (lr 0.08, momentum 0.9) for Server-FT and
# FedDF. SETTINGS=paper uses the paper's: a proxy set of 10 images per class (100
# for Fashion-MNIST), Es = 100
# for FedLAW and FedDF and 2 for Server-FT, Adam with betas (0.5, 0.999) for every
# server-side optimiser.
# Results: experiments/fedlaw/results/fmnist[_paper]/<method>_a<alpha>_seed<S>/,
# table.md, *.png.
# Every method trains on the same 70% of each client's data (the "holdout" hook, which
# fedlaw plans itself and the baselines get through client.hooks) and is evaluated on
# the 9,800 test images left after the 200-image proxy set is taken out.
set -euo pipefail
cd "$(dirname "$0")/../.."
export ROUNDS="${1:-200}"
export SETTINGS="${SETTINGS:-code}"
case "$SETTINGS" in
  code) default_out=experiments/fedlaw/results/fmnist ;;
  paper) default_out=experiments/fedlaw/results/fmnist_paper ;;
  *) echo "SETTINGS must be code or paper, got $SETTINGS" >&2; exit 2 ;;
esac
export OUT="${OUT:-$default_out}"
mkdir -p "$OUT"
bazel build //tools:run_experiment
# A private copy, so rebuilding the tree while this runs does not swap the binary.
export BIN="$(mktemp -d)/run_experiment"
cp bazel-bin/tools/run_experiment "$BIN"

run_one() {
  local method="$1" alpha="$2" seed="$3" aggregator hooks=""
  local holdout='hooks { name: "holdout" options { [type.googleapis.com/fedkit.aggregators.HoldoutOptions] { fraction: 0.3 } } }'
  local law_epochs=20 ft="epochs: 20" df="epochs: 20" proxy=""
  if [[ "$SETTINGS" == paper ]]; then
    law_epochs=100
    ft="epochs: 2 optimizer: ADAM"
    df="epochs: 100 optimizer: ADAM"
    proxy="proxy { size: 100 }"
  fi
  case "$method" in
    fedlaw) aggregator="name: \"fedlaw\" options { [type.googleapis.com/fedkit.aggregators.FedLawOptions] { server_epochs: $law_epochs lr: 0.005 } }" ;;
    fedlaw_swa) aggregator="name: \"fedlaw\" options { [type.googleapis.com/fedkit.aggregators.FedLawOptions] { server_epochs: $law_epochs lr: 0.005 swa: true } }" ;;
    fedavg) aggregator='name: "fedavg" options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1 } }'; hooks="$holdout" ;;
    server_ft) aggregator="name: \"server_ft\" options { [type.googleapis.com/fedkit.aggregators.ServerFtOptions] { sgd { $ft } } }"; hooks="$holdout" ;;
    feddf) aggregator="name: \"feddf\" options { [type.googleapis.com/fedkit.aggregators.FedDfOptions] { sgd { $df } temperature: 1 } }"; hooks="$holdout" ;;
    *) echo "unknown method $method"; return 1 ;;
  esac
  local partition="options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: $alpha min_size: 1 balance: false } }"
  local dir="$OUT/${method}_a${alpha}_seed${seed}"
  if [[ -f "$dir/summary.json" ]]; then
    echo "kept $method alpha $alpha seed $seed (already in $dir)"
    return 0
  fi
  if "$BIN" --spec=experiments/fedlaw/fmnist.textproto --output_dir="$dir" \
      --set="seed: $seed server { rounds: $ROUNDS $proxy } partition { $partition } client { $hooks } aggregator { $aggregator } simulation { workers: 1 threads_per_worker: 1 }" \
      > "$dir.log" 2>&1; then
    echo "done $method alpha $alpha seed $seed"
  else
    echo "FAILED $method alpha $alpha seed $seed (see $dir.log)"
  fi
}
export -f run_one

for seed in ${SEEDS:-1 2}; do
  for alpha in ${ALPHAS:-100 0.1}; do
    for method in ${METHODS:-fedlaw fedavg server_ft feddf}; do
      echo "$method $alpha $seed"
    done
  done
done | xargs -P "${JOBS:-2}" -L 1 bash -c 'run_one "$0" "$1" "$2"'

py=/usr/bin/python3  # Debian's, where python3-matplotlib installs
[[ -x "$py" ]] || py=python3
"$py" experiments/fedlaw/fmnist_table.py "$OUT" "$SETTINGS"
