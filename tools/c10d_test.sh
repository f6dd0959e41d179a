#!/bin/bash
# Distributed runs (simulation.backend C10D) against the in-process run of the
# same spec: 1 and 4 local processes through tools:launch, 3 rounds each (2
# processes: tools:c10d_aggregators_test, for every aggregator).
#  - merge GATHER (every update to rank 0, accumulated in cohort order): metrics.csv
#    (but for wall time) and model.pt byte-identical to in-process, for FedAvg,
#    SCAFFOLD (client state on its owner) and FedLAW (needs every update).
#  - merge AUTO (partial sums all-reduced) for FedAvg and SCAFFOLD with 4
#    processes: the sums are added in another order, so the weights may differ in
#    the last bits. They must be within a tolerance 100 times smaller than what one
#    missing client changes, and every counter in metrics.csv must be equal.
#  - a checkpoint of 2 processes resumed by 4 ends as the in-process run.
# Bazel runs this in the runfiles root.
set -uo pipefail

launch="$PWD/tools/launch"
runner="$PWD/tools/run_experiment"
model_diff="$PWD/tools/model_diff"
export FEDKIT_RUN_EXPERIMENT="$runner"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

spec="$tmp/spec.textproto"
cat > "$spec" <<'SPEC'
name: "c10d"
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
server { rounds: 3 clients_per_round: 6 proxy { split: TEST size: 60 } }
simulation { workers: 1 threads_per_worker: 1 }
output { checkpoint_every: 0 }
SPEC
fedlaw='aggregator { name: "fedlaw" options { [type.googleapis.com/fedkit.aggregators.FedLawOptions] { server_epochs: 2 } } }'

source "$PWD/tools/c10d_test_lib.sh"

run_in_process() {  # NAME SET
  "$runner" --spec="$spec" --output_dir="$tmp/$1" --set="$2" > "$tmp/$1.log" 2>&1 ||
    { fail "$1: in-process run"; tail -20 "$tmp/$1.log"; }
}
run_launched() {  # NAME PROCESSES SET
  "$launch" --processes="$2" -- --spec="$spec" --output_dir="$tmp/$1" --set="$3" > "$tmp/$1.log" 2>&1 ||
    { fail "$1: launched run"; tail -30 "$tmp/$1.log"; }
}

for aggregator in fedavg scaffold fedlaw; do
  set_aggregator="aggregator { name: \"$aggregator\" }"
  [[ $aggregator == fedlaw ]] && set_aggregator="$fedlaw"
  run_in_process "$aggregator" "$set_aggregator"
  has_rounds "$tmp/$aggregator" 3 "$aggregator in process"
  for processes in 1 4; do
    name="$aggregator.gather.$processes"
    before=$failures
    run_launched "$name" "$processes" "$set_aggregator simulation { c10d { merge: GATHER } }"
    has_rounds "$tmp/$name" 3 "$name" || continue
    diff <(metrics "$tmp/$aggregator") <(metrics "$tmp/$name") > /dev/null ||
      fail "$name: metrics.csv differs from in-process"
    cmp "$tmp/$aggregator/model.pt" "$tmp/$name/model.pt" || fail "$name: model.pt differs"
    grep -q "\"world_size\": $processes" "$tmp/$name/summary.json" ||
      fail "$name: summary.json lacks the c10d report"
    [[ $failures -eq $before ]] && echo "ok $name: bit for bit"
  done
done

# A checkpoint written by 2 processes after round 2, resumed by 4 for round 3:
# the clients' states (SCAFFOLD's c_i, kept momentum) change owners on the way.
before=$failures
run_launched scaffold.resumed 2 \
  'aggregator { name: "scaffold" } simulation { c10d { merge: GATHER } } server { rounds: 2 } output { checkpoint_every: 1 }'
"$launch" --processes=4 -- --resume="$tmp/scaffold.resumed" --set='server { rounds: 3 }' \
  > "$tmp/scaffold.resumed.2.log" 2>&1 || { fail "resuming with 4 processes"; tail -20 "$tmp/scaffold.resumed.2.log"; }
has_rounds "$tmp/scaffold.resumed" 3 "scaffold resumed with 4 processes" &&
  { diff <(metrics "$tmp/scaffold") <(metrics "$tmp/scaffold.resumed") > /dev/null ||
      fail "scaffold resumed with 4 processes: metrics.csv differs from in-process"; }
cmp "$tmp/scaffold/model.pt" "$tmp/scaffold.resumed/model.pt" ||
  fail "scaffold resumed with 4 processes: model.pt differs"
[[ $failures -eq $before ]] && echo "ok scaffold: checkpointed by 2 processes, resumed by 4, bit for bit"

# One client's update missing (a NaN update, rejected), in process: what the
# tolerance must be far below.
run_in_process fedavg.missing 'aggregator { name: "fedavg" } client { faults { kind: NAN_UPDATE fraction: 0.125 } }'
tolerance=1e-5
if weight_diff "$tmp/fedavg/model.pt" "$tmp/fedavg.missing/model.pt" "one missing client"; then
  awk -v d="$weight_diff" -v t="$tolerance" 'BEGIN { exit !(d > 100 * t) }' ||
    fail "one missing client changes the weights by $weight_diff only: the tolerance $tolerance cannot catch it"
  echo "one missing client moves the weights by up to $weight_diff"
fi
for aggregator in fedavg scaffold; do
  name="$aggregator.sum.4"
  before=$failures
  run_launched "$name" 4 "aggregator { name: \"$aggregator\" }"
  grep -q "partial sums all-reduced" "$tmp/$name.log" || fail "$name: updates were not all-reduced"
  has_rounds "$tmp/$name" 3 "$name" &&
    { diff <(counters "$tmp/$aggregator") <(counters "$tmp/$name") > /dev/null ||
        fail "$name: metrics.csv counters differ from in-process"; }
  weight_diff "$tmp/$aggregator/model.pt" "$tmp/$name/model.pt" "$name" || continue
  at_most "$weight_diff" "$tolerance" ||
    fail "$name: weights differ by $weight_diff from in-process (tolerance $tolerance)"
  [[ $failures -eq $before ]] && echo "ok $name: weights within $weight_diff of in-process"
done

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo PASS
