#!/bin/bash
# Every registered aggregator (run_experiment --list) over real Gloo with 2
# processes against the in-process run of the same spec, 3 rounds each. Merge
# AUTO first: its log says whether the partial sums were all-reduced or the
# updates gathered (the aggregator has no partial sums).
#  - all-reduced: every counter in metrics.csv equal and the weights within the
#    tolerance of tools:c10d_test, which must be far below what one missing
#    client changes for this aggregator; and merge GATHER bit for bit.
#  - gathered: that run is the GATHER path, bit for bit.
# Personalised methods (their clients keep tensors on their owning rank) must
# also give every client_acc_* column of the in-process run: rank 0 evaluates
# each client's own model with the tensors the other rank sends it.
# Default options, but for the cases below. Bazel runs this in the runfiles root,
# in shards (TEST_TOTAL_SHARDS) that take every n-th case.
set -uo pipefail

launch="$PWD/tools/launch"
runner="$PWD/tools/run_experiment"
model_diff="$PWD/tools/model_diff"
export FEDKIT_RUN_EXPERIMENT="$runner"
# MKL's own kernels (PyPI's LibTorch 2.x links MKL) turn FedAdagrad's in-process
# run, and only it, 1.4e-3 away from the all-reduced run and from every
# OpenBLAS run by round 3 (4.5e-4 at round 2; round 1 agrees to 4e-8). The cause
# is not pinned down; MKL's strict mode gives every run within 4e-8 again, and
# this test measures the merge, not MKL. OpenBLAS (Debian) ignores the variable.
export MKL_CBWR=COMPATIBLE
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
source "$PWD/tools/c10d_test_lib.sh"
rounds=3
tolerance=1e-5

spec="$tmp/spec.textproto"
cat > "$spec" <<SPEC
name: "c10d_aggregators"
seed: 5
device: CPU
dataset {
  name: "fashion_mnist"
  options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 1200 test_limit: 300 } }
}
partition {
  name: "dirichlet"
  num_clients: 8
  options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 0.5 } }
}
model { name: "mlp" options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] } } }
client {
  steps: 5
  batch_size: 16
  optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
  keep_optimizer_state: true
}
server { rounds: $rounds clients_per_round: 6 proxy { split: TEST size: 60 } }
simulation { workers: 1 threads_per_worker: 1 }
output { checkpoint_every: 0 }
SPEC

run_in_process() {  # NAME SET
  "$runner" --spec="$spec" --output_dir="$tmp/$1" --set="$2" > "$tmp/$1.log" 2>&1 ||
    { fail "$1: in-process run"; tail -20 "$tmp/$1.log"; return 1; }
}
run_launched() {  # NAME SET
  "$launch" --processes=2 -- --spec="$spec" --output_dir="$tmp/$1" --set="$2" > "$tmp/$1.log" 2>&1 ||
    { fail "$1: launched run"; tail -30 "$tmp/$1.log"; return 1; }
}
bit_for_bit() {  # REFERENCE NAME
  has_rounds "$tmp/$2" "$rounds" "$2" || return 1
  diff <(metrics "$tmp/$1") <(metrics "$tmp/$2") > /dev/null || fail "$2: metrics.csv differs from in-process"
  cmp "$tmp/$1/model.pt" "$tmp/$2/model.pt" || fail "$2: model.pt differs from in-process"
}

# Options other than the defaults. Server-FT's default fine-tuning (20 epochs of
# momentum SGD on the 60-example proxy) amplifies the sums' last-bit differences
# to 8e-5 in 3 rounds (1 epoch: 3e-8): the tolerance would measure the
# fine-tuning, not the merge.
# dp_fedavg's noise comes from the seed here, so that runs can be compared at all
# (by default each run draws its own from the operating system).
declare -A options=(
  [server_ft]='options { [type.googleapis.com/fedkit.aggregators.ServerFtOptions] { sgd { epochs: 1 } } }'
  [dp_fedavg]='options { [type.googleapis.com/fedkit.aggregators.DpFedAvgOptions] { reproducible_noise: true } }'
)
# What else a case needs of the spec: FedBN keeps normalisation layers on the
# clients, so its model needs some; FedRep trains in phases, each with an
# optimiser of its own, so there is no one optimiser state to keep; pFedMe, APFL
# and Per-FedAvg take plain SGD steps themselves.
plain_sgd='client { optimizer { momentum: 0 } keep_optimizer_state: false }'
declare -A spec_sets=(
  [fedbn]='model { options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] batch_norm: true } } }'
  [fedrep]='client { keep_optimizer_state: false }'
  [pfedme]="$plain_sgd"
  [apfl]="$plain_sgd"
  [per_fedavg]="$plain_sgd"
)
# Configurations whose partial sums the defaults leave out (norm clipping sums
# only with a fixed bound): case name, then the aggregator.
extra_cases=(
  'norm_clip.max_norm' 'aggregator { name: "norm_clip" options { [type.googleapis.com/fedkit.aggregators.NormClipOptions] { max_norm: 0.3 } } }'
)

aggregators=$("$runner" --list=names | awk '$1 == "aggregator" {print $2}')
[[ -n "$aggregators" ]] || { echo "FAIL run_experiment --list names no aggregator"; exit 1; }
cases=()
for aggregator in $aggregators; do
  cases+=("$aggregator" "aggregator { name: \"$aggregator\" ${options[$aggregator]:-} } ${spec_sets[$aggregator]:-}")
done
cases+=("${extra_cases[@]}")

# Bazel's sharding: this shard takes every TEST_TOTAL_SHARDS-th case.
shards="${TEST_TOTAL_SHARDS:-1}" shard="${TEST_SHARD_INDEX:-0}"
[[ -n "${TEST_SHARD_STATUS_FILE:-}" ]] && touch "$TEST_SHARD_STATUS_FILE"

summed=()
gathered=()
personal=()
# One client's update missing (a NaN update, rejected): what the tolerance must
# be far below.
missing='client { faults { kind: NAN_UPDATE fraction: 0.125 } }'
for ((i = 0; i < ${#cases[@]}; i += 2)); do
  (((i / 2) % shards == shard)) || continue
  case="${cases[i]}" set_aggregator="${cases[i + 1]}"
  before=$failures
  run_in_process "$case" "$set_aggregator" || continue
  has_rounds "$tmp/$case" "$rounds" "$case in process" || continue
  if ! "$launch" --processes=2 -- --spec="$spec" --output_dir="$tmp/$case.auto" \
      --set="$set_aggregator" > "$tmp/$case.auto.log" 2>&1; then
    fail "$case.auto: launched run"
    tail -30 "$tmp/$case.auto.log"
    continue
  fi
  # The in-process run's summary says which model each client was evaluated with.
  if grep -Eq '"model": "(personal|global_with_personal)"' "$tmp/$case/summary.json"; then
    personal+=("$case")
    has_rounds "$tmp/$case.auto" "$rounds" "$case.auto" &&
      { diff <(client_accuracy "$tmp/$case") <(client_accuracy "$tmp/$case.auto") ||
          fail "$case.auto: client_acc_* differ from in-process (rank 0 lacks rank 1's personal tensors?)"; }
  fi
  if grep -q "c10d: every update gathered to rank 0" "$tmp/$case.auto.log"; then
    gathered+=("$case")
    bit_for_bit "$case" "$case.auto"
    [[ $failures -eq $before ]] && echo "ok $case: no partial sums; gathered, bit for bit"
    continue
  fi
  if ! grep -q "c10d: the aggregator's partial sums all-reduced" "$tmp/$case.auto.log"; then
    fail "$case.auto: the log says neither how the updates met"
    continue
  fi
  summed+=("$case")
  has_rounds "$tmp/$case.auto" "$rounds" "$case.auto" &&
    { diff <(counters "$tmp/$case") <(counters "$tmp/$case.auto") ||
        fail "$case.auto: metrics.csv counters differ from in-process"; }
  if weight_diff "$tmp/$case/model.pt" "$tmp/$case.auto/model.pt" "$case.auto"; then
    at_most "$weight_diff" "$tolerance" ||
      fail "$case.auto: weights differ by $weight_diff from in-process (tolerance $tolerance)"
    auto_diff="$weight_diff"
  fi
  run_in_process "$case.missing" "$set_aggregator $missing" &&
    weight_diff "$tmp/$case/model.pt" "$tmp/$case.missing/model.pt" "$case.missing" &&
    { awk -v d="$weight_diff" -v t="$tolerance" 'BEGIN { exit !(d > 100 * t) }' ||
        fail "$case: one missing client changes the weights by $weight_diff only: the tolerance $tolerance cannot catch it"; }
  run_launched "$case.gather" "$set_aggregator simulation { c10d { merge: GATHER } }" &&
    bit_for_bit "$case" "$case.gather"
  [[ $failures -eq $before ]] &&
    echo "ok $case: partial sums within $auto_diff of in-process (one missing client: $weight_diff); gathered, bit for bit"
done
echo "partial sums all-reduced: ${summed[*]:-none}"
echo "updates gathered: ${gathered[*]:-none}"
echo "personal tensors, client accuracy as in process: ${personal[*]:-none}"
# What the classification must find, checked by name in the shard that ran the
# case: FedAvg has partial sums; the personalised methods keep tensors per client
# (FedBABU and Per-FedAvg keep nothing per client).
must_sum=(fedavg)
must_personal=(fedper lg_fedavg fedbn fedrep ditto pfedme apfl)
registered=" $(tr '\n' ' ' <<< "$aggregators") "
for ((i = 0; i < ${#cases[@]}; i += 2)); do
  (((i / 2) % shards == shard)) || continue
  case="${cases[i]}"
  [[ " ${must_sum[*]} " == *" $case "* && " ${summed[*]:-} " != *" $case "* ]] &&
    fail "$case: its partial sums were not all-reduced"
  [[ " ${must_personal[*]} " == *" $case "* && " ${personal[*]:-} " != *" $case "* ]] &&
    fail "$case: kept no personal tensors (rank 0 would evaluate it with the global model)"
done
for name in "${must_sum[@]}" "${must_personal[@]}"; do
  [[ "$registered" == *" $name "* ]] || fail "$name is not registered (run_experiment --list=names)"
done

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo PASS
