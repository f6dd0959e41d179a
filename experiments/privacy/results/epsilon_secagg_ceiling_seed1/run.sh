#!/bin/bash
# The four collapsing secure-aggregation cells, seed 1, with adaptive clipping capped
# at B = 10. From the repository's root, after bazel build //tools:run_experiment;
# OUT (default /tmp/epsilon_secagg_ceiling) receives the run folders.
set -e
OUT=${OUT:-/tmp/epsilon_secagg_ceiling}
S=experiments/privacy/fmnist_dp_fedavg.textproto
run() {  # name base epsilon
  bazel-bin/tools/run_experiment --spec=$S --output_dir=$OUT/$1 --set="seed: 1 simulation { workers: 1 threads_per_worker: 1 } server { secure_aggregation { neighbours: 14 update_norm_bound: 10 max_weight: 1 } } aggregator { name: \"dp_fedavg\" options { [type.googleapis.com/fedkit.aggregators.DpFedAvgOptions] { target_epsilon: $3 delta: 1e-5 adaptive { max_clip_norm: 10 } base { name: \"$2\" } } } }" > $OUT/$1.log 2>&1
}
mkdir -p $OUT
run fedavg_eps1_seed1 fedavg 1 &
run fedavgm_eps1_seed1 fedavgm 1 &
wait
run fedavgm_eps2_seed1 fedavgm 2 &
run fedexp_eps1_seed1 fedexp 1 &
wait
