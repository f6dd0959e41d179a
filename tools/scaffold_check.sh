#!/bin/bash
# The plugin scaffold's generated code, compiled and run: tools/new_plugin.py
# writes one plugin of every kind (generated_aggregator, generated_hook,
# generated_partitioner, generated_model, generated_dataset) into this tree, and
#  1. their own tests must fail at their fill-in values and nowhere else;
#  2. a 2-round experiment made of all five together must run;
#  3. the shared suites (golden list, conformance, hook conformance,
#     composition) must pass on them.
# Its last line is bazel's "Executed ..." of the suites, which tools/test.sh counts.
# The tree is put back as it was on any exit. It generates in place, not into a
# copy, because a copy is a new Bazel workspace that rebuilds everything (about
# 20 minutes on 2 cores); here only the new plugins compile and the suites relink.
# Flags go to every bazel command. Part of tools/test.sh, after the other halves.
set -uo pipefail
cd "$(dirname "$0")/.."

kinds=(aggregator hook partitioner model dataset)
declare -A folder=(
  [aggregator]=aggregators/generated_aggregator
  [hook]=aggregators/generated_hook
  [partitioner]=data/partitioners/generated_partitioner
  [model]=models/generated_model
  [dataset]=data/generated_dataset
)
edited=(aggregators/BUILD data/BUILD models/BUILD tools/registry_golden_test.cc
        aggregators/composition_test.cc)

for kind in "${kinds[@]}"; do
  if [[ -e "${folder[$kind]}" ]]; then
    echo "scaffold_check: ${folder[$kind]} exists (a previous check interrupted?); remove it" >&2
    exit 1
  fi
done
backup=$(mktemp -d)
for file in "${edited[@]}"; do cp --parents "$file" "$backup/"; done
restore() {
  for kind in "${kinds[@]}"; do rm -rf "${folder[$kind]}"; done
  for file in "${edited[@]}"; do cp "$backup/$file" "$file"; done
  rm -rf "$backup"
}
trap restore EXIT

fail() { echo "scaffold_check: $*" >&2; exit 1; }

for kind in "${kinds[@]}"; do
  python3 tools/new_plugin.py --kind="$kind" --name="generated_$kind" --root=. >/dev/null ||
    fail "tools/new_plugin.py --kind=$kind failed"
done

targets=()
for kind in "${kinds[@]}"; do targets+=("//${folder[$kind]}:all"); done
bazel build "$@" "${targets[@]}" //tools:run_experiment || fail "the generated plugins do not build"

# 1. Each own test fails, and only where a value is left for the author.
own_tests=()
for kind in "${kinds[@]}"; do own_tests+=("//${folder[$kind]}:generated_${kind}_test"); done
bazel test "$@" --test_output=summary "${own_tests[@]}" >/dev/null 2>&1
for kind in "${kinds[@]}"; do
  log="bazel-testlogs/${folder[$kind]}/generated_${kind}_test/test.log"
  [[ -f "$log" ]] || fail "generated_${kind}_test left no log"
  failures=$(grep -c ": Failure$" "$log")
  fill_ins=$(grep -c "fill in the .* worked by hand" "$log")
  if [[ $failures -eq 0 || $failures -ne $fill_ins ]]; then
    cat "$log"
    fail "generated_${kind}_test: $failures failure(s), $fill_ins at a fill-in value; every failure must be one"
  fi
  echo "generated_${kind}_test fails at its $fill_ins fill-in value(s) only, as generated"
done

# 2. The five together: a run from the generated dataset, split, model, hook and
# aggregator.
spec=$(mktemp --suffix=.textproto)
out=$(mktemp -d)
cat >"$spec" <<'EOF'
name: "generated_plugins"
seed: 1
device: CPU
dataset { name: "generated_dataset" }
partition { name: "generated_partitioner" num_clients: 10 }
model { name: "generated_model" }
client {
  epochs: 1
  batch_size: 20
  optimizer { kind: SGD lr: 0.1 }
  hooks { name: "generated_hook" }
}
server { rounds: 2 clients_per_round: 4 eval_every: 1 }
aggregator { name: "generated_aggregator" }
EOF
bazel-bin/tools/run_experiment --spec="$spec" --output_dir="$out" >"$out/stdout" 2>&1 ||
  { cat "$out/stdout"; fail "the experiment of the five generated plugins failed"; }
grep -q "^round 2/2 " "$out/stdout" || { cat "$out/stdout"; fail "the experiment ran no round 2"; }
grep "^round " "$out/stdout"
rm -rf "$spec" "$out"

# 3. The shared suites, on the generated plugins (a filter that matches nothing
# runs nothing and passes: each log must show tests run).
bazel test "$@" //tools:registry_golden_test || fail "the golden list does not hold the generated plugins"
bazel test "$@" --test_filter='*generated_*' //aggregators:conformance_test \
  //aggregators:hook_conformance_test //aggregators:composition_test
code=$?
for suite in conformance_test hook_conformance_test composition_test; do
  grep -qE "^\[  PASSED  \] [1-9][0-9]* test" "bazel-testlogs/aggregators/$suite/test.log" ||
    fail "$suite ran no test of the generated plugins"
done
[[ $code -eq 0 ]] || fail "the shared suites failed on the generated plugins"
