#!/bin/bash
# MA-Echo's one-shot reproductions; every run aggregates one set of client models
# with MA-Echo and the baselines of its spec (see the specs), and the table script
# reads each run's one_shot.csv.
#   experiments/maecho/run.sh                 everything below, seeds 1 2 3
#   SEEDS="1" PARTS="setting1" experiments/maecho/run.sh
# Parts (results under experiments/maecho/results/<part>/):
#   setting1  the code's logged setting (5 clients, Dirichlet 0.01) on MNIST and
#             Fashion-MNIST
#   table1    the paper's Table 1 shape on MNIST: 5 and 10 clients x Dirichlet
#             beta 0.01, 0.1, 0.5, with the aggregation's wall time
#   table6    the paper's Table 6 shape on MNIST: principal components kept in each
#             client's projection (5, 10, 20, 50; all = setting1) and bytes sent
#   qp        setting1 with the paper's QP weights (bound 0.5) in place of 1/N
#   trace     setting1 on MNIST with MA-Echo's test accuracy after every iteration
#             (iterations.png)
# A run whose summary.json exists is skipped (delete its folder to redo it). Runs
# go one at a time with one thread, as the timings are reported.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-experiments/maecho/results}"
bazel build -c opt //tools:run_experiment
# A private copy, so rebuilding the tree while this runs does not swap the binary.
BIN="$(mktemp -d)/run_experiment"
cp bazel-bin/tools/run_experiment "$BIN"

maecho() {  # the spec's aggregator with extra MaEchoOptions fields
  echo "aggregator { name: \"maecho\" options { [type.googleapis.com/fedkit.aggregators.MaEchoOptions] { iterations: 60 step: 1.6 $1 } } }"
}

run() {  # run DIR SPEC SET
  local dir="$1" spec="$2" set="$3"
  if [[ -f "$dir/summary.json" ]]; then
    echo "kept $dir"
    return 0
  fi
  mkdir -p "$(dirname "$dir")"
  if "$BIN" --spec="$spec" --output_dir="$dir" \
      --set="$set simulation { workers: 1 threads_per_worker: 1 }" > "$dir.log" 2>&1; then
    echo "done $dir"
  else
    echo "FAILED $dir (see $dir.log)"
  fi
}

without_comparisons() {  # the spec with its server.compare blocks left out
  awk '/^  compare \{/ { skip = 1; depth = 0 }
       skip { depth += gsub(/\{/, "{") - gsub(/\}/, "}"); if (depth <= 0) skip = 0; next }
       { print }' "$1"
}

partition() {  # partition CLIENTS BETA
  echo "partition { num_clients: $1 options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: $2 min_size: 10 balance: true } } }"
}

for seed in ${SEEDS:-1 2 3}; do
  for part in ${PARTS:-setting1 table1 table6 qp trace}; do
    case "$part" in
      setting1)
        run "$OUT/setting1/mnist_seed$seed" experiments/maecho/mnist_mlp.textproto "seed: $seed"
        run "$OUT/setting1/fmnist_seed$seed" experiments/maecho/fmnist_mlp.textproto "seed: $seed"
        ;;
      table1)
        for clients in 5 10; do
          for beta in 0.01 0.1 0.5; do
            run "$OUT/table1/mnist_n${clients}_b${beta}_seed$seed" experiments/maecho/mnist_mlp.textproto \
              "seed: $seed $(partition "$clients" "$beta")"
          done
        done
        ;;
      table6)
        # Without the comparisons: the MA-Echo ones would ask the clients for
        # uncompressed projections, and a hook runs once per client.
        alone="$(mktemp -d)/mnist_mlp_alone.textproto"
        without_comparisons experiments/maecho/mnist_mlp.textproto > "$alone"
        for k in 5 10 20 50; do
          run "$OUT/table6/mnist_k${k}_seed$seed" "$alone" \
            "seed: $seed $(maecho "projection { components: $k }")"
        done
        ;;
      trace)
        alone="$(mktemp -d)/mnist_mlp_alone.textproto"
        without_comparisons experiments/maecho/mnist_mlp.textproto > "$alone"
        run "$OUT/trace/mnist_seed$seed" "$alone" \
          "seed: $seed $(maecho "trace_every: 1 trace_accuracy: true")"
        ;;
      qp)
        run "$OUT/qp/mnist_seed$seed" experiments/maecho/mnist_mlp.textproto \
          "seed: $seed $(maecho "weights: QP")"
        run "$OUT/qp/fmnist_seed$seed" experiments/maecho/fmnist_mlp.textproto \
          "seed: $seed $(maecho "weights: QP")"
        ;;
      *) echo "unknown part $part" >&2; exit 2 ;;
    esac
  done
done

py=/usr/bin/python3  # Debian's
[[ -x "$py" ]] || py=python3
"$py" experiments/maecho/tables.py "$OUT"
