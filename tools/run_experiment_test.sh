#!/bin/bash
# The runner from the command line: exit codes and one message per problem for
# the mistakes a spec author makes. Bazel runs this in the runfiles root.
set -uo pipefail

runner=tools/run_experiment
base=experiments/quickstart.textproto
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

# expect NAME EXIT_CODE PATTERN... -- ARGS: runs the runner with ARGS and checks the
# exit code and that every PATTERN (fixed string) appears in its output.
expect() {
  local name="$1" code="$2"
  shift 2
  local patterns=()
  while [[ "$1" != "--" ]]; do patterns+=("$1"); shift; done
  shift
  local out
  out="$("$runner" "$@" 2>&1)"
  local got=$?
  if [[ $got -ne $code ]]; then
    echo "FAIL $name: exit $got, expected $code"; echo "$out"; failures=$((failures + 1)); return
  fi
  for p in "${patterns[@]}"; do
    if ! grep -qF -- "$p" <<<"$out"; then
      echo "FAIL $name: output lacks: $p"; echo "$out"; failures=$((failures + 1)); return
    fi
  done
  echo "ok   $name"
}

# spec_with SED_EXPR: the quickstart spec edited by sed, as a file path.
spec_with() {
  local path="$tmp/spec_$RANDOM.textproto"
  sed -e "$1" "$base" > "$path"
  echo "$path"
}

expect valid 0 "is valid" -- --spec="$PWD/$base" --validate_only

expect misspelled_field 2 "invalid spec" "has no field named \"roundz\"" ":28:9:" -- \
  --spec="$(spec_with 's/  rounds: 100/  roundz: 100/')" --validate_only

expect unknown_aggregator 2 \
  'aggregator.name: aggregator "fedavgg" is not registered; known: ' ' fedavg, ' -- \
  --spec="$(spec_with 's/name: "fedavg"/name: "fedavgg"/')" --validate_only

expect wrong_options_type 2 \
  'model (mlp): options: model "mlp" takes fedkit.models.MlpOptions, got fedkit.data.DirichletOptions' -- \
  --spec="$(spec_with 's/fedkit.models.MlpOptions\] { hidden: \[200, 200\] }/fedkit.data.DirichletOptions] { alpha: 1 }/')" \
  --validate_only

expect negative_lr 2 "client.optimizer.lr: must be > 0, got -0.05" -- \
  --spec="$(spec_with 's/lr: 0.05/lr: -0.05/')" --validate_only

# Found by fuzzing: a model too large to allocate is a spec error, not an abort.
expect model_too_large 2 "model (mlp): cannot be created: " "can't allocate memory" -- \
  --spec="$(spec_with 's/hidden: \[200, 200\]/hidden: [200, 2088888880]/')" --validate_only

expect all_problems_at_once 2 "client.optimizer.lr: must be > 0" "server.rounds: must be >= 1, got 0" \
  'aggregator "fedavgg" is not registered' -- \
  --spec="$(spec_with 's/lr: 0.05/lr: -0.05/; s/rounds: 100/rounds: 0/; s/name: "fedavg"/name: "fedavgg"/')" \
  --validate_only

expect set_override_is_validated 2 "server.clients_per_round: must be in [1, partition.num_clients = 100], got 500" -- \
  --spec="$PWD/$base" --set='server { clients_per_round: 500 }' --validate_only

expect bad_set_fragment 2 "cannot apply --set" "--set:1:" -- \
  --spec="$PWD/$base" --set='server { roundz: 3 }' --validate_only

# Declared requirements: a step-aware aggregator refuses the server's own rescaling
# of incomplete updates, and one whose algebra is SGD's refuses Adam, naming both.
expect step_aware_refuses_scale 2 \
  'server.incomplete_updates: SCALE conflicts with aggregator "fednova" (aggregator.name)' -- \
  --spec="$PWD/$base" --set='aggregator { name: "fednova" } server { incomplete_updates: SCALE }' \
  --validate_only
expect local_sgd_refuses_adam 2 \
  'client.optimizer.kind: ADAM conflicts with aggregator "fednova" (aggregator.name)' -- \
  --spec="$PWD/$base" --set='aggregator { name: "fednova" } client { optimizer { kind: ADAM } }' \
  --validate_only
expect fednova_with_drop_is_valid 0 "is valid" -- \
  --spec="$PWD/$base" --set='aggregator { name: "fednova" } server { incomplete_updates: DROP }' \
  --validate_only

expect missing_spec_file 2 "cannot read spec file $tmp/none.textproto" -- --spec="$tmp/none.textproto"

expect missing_dataset_file 1 "/no/such/dir/train-images-idx3-ubyte[.gz]" "dataset-fashion-mnist" -- \
  --spec="$PWD/$base" --output_dir="$tmp/out_missing" \
  --set='dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { dir: "/no/such/dir" } } }'

expect list 0 "aggregator:" "fedavg               fedkit.aggregators.FedAvgOptions" \
  "mlp                  fedkit.models.MlpOptions" "server_lr: optional double" -- --list
expect list_names 0 "aggregator fedavg" "model mlp" "client_hook scaffold" -- --list=names
expect list_bad_format 2 "--list=xml: expected text, json or names" -- --list=xml

# --list=json names the plugins --list=names does, and every field of every
# plugin's options carries its .proto comment: the listing is the options'
# manual, so a field added without one fails here by name.
if "$runner" --list=json > "$tmp/list.json" && "$runner" --list=names > "$tmp/names.txt" &&
  python3 - "$tmp/list.json" "$tmp/names.txt" <<'PY'; then
import json, sys
catalog = json.load(open(sys.argv[1]))
named = sorted(tuple(line.split(' ', 1)) for line in open(sys.argv[2]).read().splitlines())
listed = sorted((k['kind'], p['name']) for k in catalog['kinds'] for p in k['plugins'])
problems = [] if named == listed else [f'--list=names {named} differs from --list=json {listed}']
def walk(fields, path):
  for f in fields:
    if not f['comment']:
      problems.append(f'{path}.{f["name"]}: no comment in its .proto file')
    walk(f['fields'], f'{path}.{f["name"]}')
for kind in catalog['kinds']:
  if not kind['plugins']:
    problems.append(f'no {kind["kind"]} is registered')
  for plugin in kind['plugins']:
    walk(plugin['fields'], f'{kind["kind"]} {plugin["name"]}')
print('\n'.join(problems))
sys.exit(1 if problems else 0)
PY
  echo "ok   list_json"
else
  echo "FAIL list_json"; failures=$((failures + 1))
fi

# A real (tiny) run writes every output file.
tiny='server { rounds: 2 } partition { num_clients: 20 } dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 2000 test_limit: 500 } } }'
expect tiny_run 0 "round 2/2" "results in $tmp/out_run" -- --spec="$PWD/$base" --output_dir="$tmp/out_run" \
  --set="$tiny"
for f in metrics.csv summary.json spec.textproto; do
  if [[ ! -s "$tmp/out_run/$f" ]]; then echo "FAIL tiny_run: no $f"; failures=$((failures + 1)); fi
done
if ! grep -q "rounds: 2" "$tmp/out_run/spec.textproto"; then
  echo "FAIL tiny_run: spec.textproto is not the resolved spec"; failures=$((failures + 1))
fi

# client.upload from a spec: UNIFORM_8BIT sends each entry of the delta as 1 byte
# plus each tensor's two 4-byte bounds. The MLP (784-200-200-10) has 784*200 + 200
# + 200*200 + 200 + 200*10 + 10 = 199210 entries in 6 tensors, so each of the
# 2 rounds x 10 uploads is 199210 + 6*8 bytes (4*199210 as float32 without a
# codec); and the clients send rounded deltas, so the model is not the
# uncompressed run's.
expect uniform_8bit_upload 0 "round 2/2" -- --spec="$PWD/$base" --output_dir="$tmp/out_8bit" \
  --set="$tiny client { upload { kind: UNIFORM_8BIT } }"
for run in "out_run $((20 * 4 * 199210))" "out_8bit $((20 * (199210 + 6 * 8)))"; do
  read -r dir bytes <<<"$run"
  if ! grep -qF "\"bytes_up\": $bytes," "$tmp/$dir/summary.json"; then
    echo "FAIL uniform_8bit_upload: $dir: bytes_up is not $bytes:"; grep bytes_up "$tmp/$dir/summary.json"
    failures=$((failures + 1))
  fi
done
if cmp -s "$tmp/out_run/model.pt" "$tmp/out_8bit/model.pt"; then
  echo "FAIL uniform_8bit_upload: the model equals the uncompressed run's"; failures=$((failures + 1))
fi

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all runner checks passed"
