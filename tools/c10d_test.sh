#!/bin/bash
# Distributed runs (simulation.backend C10D) against the in-process run of the
# same spec: 1, 2 and 4 local processes through tools:launch, 3 rounds each.
#  - merge GATHER (every update to rank 0, accumulated in cohort order): metrics.csv
#    (but for wall time) and model.pt byte-identical to in-process, for FedAvg,
#    SCAFFOLD (client state on its owner) and FedLAW (needs every update).
#  - merge AUTO (partial sums all-reduced) for FedAvg and SCAFFOLD: the sums are
#    added in another order, so the weights may differ in the last bits. They must
#    be within a tolerance 100 times smaller than what one missing client changes,
#    and every counter in metrics.csv must be equal.
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

# metrics.csv without its wall-time column, and only the counters.
metrics() { cut -d, -f1-10,12- "$1/metrics.csv"; }
counters() { cut -d, -f1,5-10,12 "$1/metrics.csv"; }

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
  for processes in 1 2 4; do
    name="$aggregator.gather.$processes"
    run_launched "$name" "$processes" "$set_aggregator simulation { c10d { merge: GATHER } }"
    diff <(metrics "$tmp/$aggregator") <(metrics "$tmp/$name") > /dev/null ||
      fail "$name: metrics.csv differs from in-process"
    cmp -s "$tmp/$aggregator/model.pt" "$tmp/$name/model.pt" || fail "$name: model.pt differs"
    grep -q "\"world_size\": $processes" "$tmp/$name/summary.json" ||
      fail "$name: summary.json lacks the c10d report"
    echo "ok $name: bit for bit"
  done
done

# A checkpoint written by 2 processes after round 2, resumed by 4 for round 3:
# the clients' states (SCAFFOLD's c_i, kept momentum) change owners on the way.
run_launched scaffold.resumed 2 \
  'aggregator { name: "scaffold" } simulation { c10d { merge: GATHER } } server { rounds: 2 } output { checkpoint_every: 1 }'
"$launch" --processes=4 -- --resume="$tmp/scaffold.resumed" --set='server { rounds: 3 }' \
  > "$tmp/scaffold.resumed.2.log" 2>&1 || { fail "resuming with 4 processes"; tail -20 "$tmp/scaffold.resumed.2.log"; }
diff <(metrics "$tmp/scaffold") <(metrics "$tmp/scaffold.resumed") > /dev/null ||
  fail "scaffold resumed with 4 processes: metrics.csv differs from in-process"
cmp -s "$tmp/scaffold/model.pt" "$tmp/scaffold.resumed/model.pt" ||
  fail "scaffold resumed with 4 processes: model.pt differs"
echo "ok scaffold: checkpointed by 2 processes, resumed by 4, bit for bit"

# One client's update missing (a NaN update, rejected), in process: what the
# tolerance must be far below.
run_in_process fedavg.missing 'aggregator { name: "fedavg" } client { faults { kind: NAN_UPDATE fraction: 0.125 } }'
missing=$("$model_diff" "$tmp/fedavg/model.pt" "$tmp/fedavg.missing/model.pt" | awk '{print $2}')
tolerance=1e-5
awk -v m="$missing" -v t="$tolerance" 'BEGIN { exit !(m > 100 * t) }' ||
  fail "one missing client changes the weights by $missing only: the tolerance $tolerance cannot catch it"
echo "one missing client moves the weights by up to $missing"
for aggregator in fedavg scaffold; do
  for processes in 2 4; do
    name="$aggregator.sum.$processes"
    run_launched "$name" "$processes" "aggregator { name: \"$aggregator\" }"
    grep -q "partial sums all-reduced" "$tmp/$name.log" || fail "$name: updates were not all-reduced"
    diff <(counters "$tmp/$aggregator") <(counters "$tmp/$name") > /dev/null ||
      fail "$name: metrics.csv counters differ from in-process"
    diff=$("$model_diff" "$tmp/$aggregator/model.pt" "$tmp/$name/model.pt" | awk '{print $2}')
    awk -v d="$diff" -v t="$tolerance" 'BEGIN { exit !(d <= t) }' ||
      fail "$name: weights differ by $diff from in-process (tolerance $tolerance)"
    echo "ok $name: weights within $diff of in-process"
  done
done

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo PASS
