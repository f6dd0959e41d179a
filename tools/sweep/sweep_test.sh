#!/bin/bash
# The sweep tool end to end on a tiny Fashion-MNIST spec: a sweep of 2 variants x
# 2 seeds runs and reports; run again, nothing runs and the reports are the same;
# a run without its summary continues from its checkpoint; a second sweep in a
# folder another one holds refuses to start;
# a changed sweep marks its runs stale; a bad override stops everything before a
# run folder exists (exit 2); a run that fails is reported while the others
# finish (exit 1). Bazel runs this in the runfiles root.
set -uo pipefail

sweep="$PWD/tools/sweep/sweep"
example="$PWD/tools/sweep/testdata/example.sweep.textproto"
tiny="$PWD/tools/sweep/testdata/tiny.textproto"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# 1. The example: 2 variants x 2 seeds, 2 at a time.
out="$tmp/example"
"$sweep" --sweep="$example" --out="$out" > "$tmp/first.txt" 2>&1
code=$?
[[ $code -eq 0 ]] || { fail "example: exit $code"; cat "$tmp/first.txt"; }
rows="$(tail -n +2 "$out/runs.csv" | cut -d, -f1,2 | sort | tr '\n' ' ')"
[[ "$rows" == "fedavg,1 fedavg,2 fedexp,1 fedexp,2 " ]] || fail "runs.csv rows: $rows"
header="variant,seed,final_test_accuracy,best_test_accuracy,last10_mean_test_accuracy"
header+=",rounds_to_0.5_test_accuracy,final_test_loss,wall_seconds,peak_rss_mb,stale"
[[ "$(head -n 1 "$out/runs.csv")" == "$header" ]] || fail "runs.csv header: $(head -n 1 "$out/runs.csv")"
for dir in fedavg_seed1 fedavg_seed2 fedexp_seed1 fedexp_seed2; do
  [[ -f "$out/$dir/summary.json" && -f "$out/$dir.log" ]] || fail "$dir: no summary.json or log"
  grep -q '^\[sweep\] {"how": "exit 0", "wall_seconds": ' "$out/$dir.log" || fail "$dir.log: no timing"
done
# Each run got its seed, the sweep's set, its variant's set and one thread.
grep -q "^seed: 2$" "$out/fedexp_seed2/spec.textproto" || fail "fedexp seed 2: seed"
grep -q "rounds: 3" "$out/fedexp_seed2/spec.textproto" || fail "fedexp seed 2: the sweep's set"
grep -q 'name: "fedexp"' "$out/fedexp_seed2/spec.textproto" || fail "fedexp seed 2: the variant's set"
grep -q "threads_per_worker: 1" "$out/fedexp_seed2/spec.textproto" || fail "fedexp seed 2: threads"
grep -q "^| FedAvg (baseline) | " "$out/table.md" || fail "table.md lacks FedAvg's row"
grep -q "^| FedExP (eps 0.1) | " "$out/table.md" || fail "table.md lacks FedExP's row"
grep -q "^## Paired differences to FedAvg$" "$out/table.md" || fail "table.md lacks the paired differences"
grep -qE '^\| FedExP \(eps 0.1\) \| 2 \| [+-][0-9.]+ \[[+-][0-9.]+, [+-][0-9.]+\] \|' "$out/table.md" ||
  fail "table.md lacks FedExP's paired-difference row"
grep -qF "Reproduce: \`bazel run //tools/sweep -- --sweep=" "$out/table.md" || fail "no command"
grep -qF "[done 4/4, 0 running, 0 failed]" "$tmp/first.txt" || fail "no final progress line"
if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
  [[ -s "$out/curves.png" ]] || fail "no curves.png"
fi
# Each run wrote its partition's counts and its page; the sweep's page links them.
for dir in fedavg_seed1 fedavg_seed2 fedexp_seed1 fedexp_seed2; do
  [[ "$(head -n 1 "$out/$dir/class_counts.csv")" == "client,0,1,2,3,4,5,6,7,8,9" ]] ||
    fail "$dir: class_counts.csv header: $(head -n 1 "$out/$dir/class_counts.csv")"
  [[ $(wc -l < "$out/$dir/class_counts.csv") -eq 5 ]] || fail "$dir: not 4 clients in class_counts.csv"
  grep -q '<path class="series" data-series="test accuracy" data-points="3"' "$out/$dir/report.html" ||
    fail "$dir: report.html lacks the accuracy curve"
  grep -qF "<a href=\"$dir/report.html\">" "$out/report.html" || fail "report.html: no link to $dir"
done
grep -qF '<td>FedExP (eps 0.1)</td>' "$out/report.html" || fail "report.html lacks FedExP's row"
grep -qF 'data-series="FedAvg (2 seeds)"' "$out/report.html" || fail "report.html lacks FedAvg's curve"

# 2. Again: every run is finished, so nothing runs and the reports are the same.
cp "$out/runs.csv" "$out/table.md" "$tmp/"
before="$(stat -c '%n %Y' "$out"/*.log "$out"/*/metrics.csv)"
sleep 1
"$sweep" --sweep="$example" --out="$out" > "$tmp/second.txt" 2>&1
code=$?
[[ $code -eq 0 ]] || { fail "rerun: exit $code"; cat "$tmp/second.txt"; }
grep -qx "skipped 4 finished runs" "$tmp/second.txt" || { fail "rerun: no 'skipped 4'"; cat "$tmp/second.txt"; }
grep -q "^running" "$tmp/second.txt" && fail "rerun started runs"
[[ "$(stat -c '%n %Y' "$out"/*.log "$out"/*/metrics.csv)" == "$before" ]] || fail "rerun touched runs"
cmp -s "$tmp/runs.csv" "$out/runs.csv" || fail "rerun: runs.csv changed"
cmp -s "$tmp/table.md" "$out/table.md" || fail "rerun: table.md changed"

# 2b. A run that lost its end (summary.json gone, as if killed after its last
# checkpoint) continues from its checkpoint, its log kept, with the same numbers.
rm "$out/fedexp_seed2/summary.json"
"$sweep" --sweep="$example" --out="$out" > "$tmp/resumed.txt" 2>&1 || fail "resume: exit $?"
grep -qx "skipped 3 finished runs" "$tmp/resumed.txt" || fail "resume: not 3 skipped"
grep -q "resuming after round 3 of 3" "$out/fedexp_seed2.log" || fail "resume: not resumed"
[[ $(grep -c '^\[sweep\] {"how": "exit 0"' "$out/fedexp_seed2.log") -eq 2 ]] ||
  fail "resume: the first attempt's log is gone"
cmp -s <(cut -d, -f1-7 "$tmp/runs.csv") <(cut -d, -f1-7 "$out/runs.csv") || fail "resume: the metrics changed"

# 2c. While another sweep holds the folder, a second one refuses to start (exit 1)
# and touches no run; once the lock is free it runs as before.
rm "$out/fedavg_seed1/summary.json"
flock "$out/.sweep.lock" "$sweep" --sweep="$example" --out="$out" > "$tmp/locked.txt" 2>&1 &&
  fail "locked: a second sweep started"
grep -qF "another sweep is running in" "$tmp/locked.txt" || { fail "locked: no message"; cat "$tmp/locked.txt"; }
[[ -d "$out/fedavg_seed1" ]] || fail "locked: the held run's folder was removed"
"$sweep" --sweep="$example" --out="$out" > "$tmp/unlocked.txt" 2>&1 || fail "unlocked: exit $?"
[[ -f "$out/fedavg_seed1/summary.json" ]] || fail "unlocked: the run did not finish"

# 3. The sweep asks for 4 rounds now: its runs are stale (kept, marked) until rerun.
sed -e "s|^base_spec: .*|base_spec: \"$tiny\"|" -e 's|rounds: 3|rounds: 4|' "$example" \
  > "$tmp/changed.sweep.textproto"
"$sweep" --sweep="$tmp/changed.sweep.textproto" --out="$out" --report_only > "$tmp/stale.txt" 2>&1 ||
  fail "report_only: exit $?"
grep -qF "stale: fedavg seed 1: spec.textproto differs (run -> sweep): modified: server.rounds: 3 -> 4" \
  "$tmp/stale.txt" || { fail "no stale warning"; cat "$tmp/stale.txt"; }
grep -q "^## Stale runs" "$out/table.md" || fail "table.md lacks the stale runs"
[[ "$(cut -d, -f10 "$out/runs.csv" | tail -n +2 | sort -u)" == "true" ]] || fail "runs.csv: not stale"

# 4. A bad override: exit 2 naming the variant and the field, before any run.
cat > "$tmp/bad.sweep.textproto" <<SWEEP
base_spec: "$tiny"
variants { name: "good" }
variants { name: "typo" set: "server { roundz: 3 }" }
variants { name: "negative_lr" set: "client { optimizer { lr: -1 } }" }
seeds: [1]
metrics { kind: FINAL }
baseline: "good"
out: "bad_results"
SWEEP
"$sweep" --sweep="$tmp/bad.sweep.textproto" > "$tmp/bad.txt" 2>&1
code=$?
[[ $code -eq 2 ]] || fail "bad override: exit $code, expected 2"
grep -qF "variant \"typo\": variants[1].set:1:16: Message type \"fedkit.ServerSpec\" has no field named \"roundz\"" \
  "$tmp/bad.txt" || { fail "bad override: no message for typo"; cat "$tmp/bad.txt"; }
grep -qF 'variant "negative_lr": client.optimizer.lr: must be > 0, got -1' "$tmp/bad.txt" ||
  { fail "bad override: no message for negative_lr"; cat "$tmp/bad.txt"; }
[[ -e "$tmp/bad_results" ]] && fail "bad override: $tmp/bad_results was created"
"$sweep" --sweep="$example" --out="$tmp/only" --only=fedsgd > "$tmp/only.txt" 2>&1
code=$?
[[ $code -eq 2 ]] && grep -qF -- '--only: "fedsgd" is not a variant' "$tmp/only.txt" ||
  fail "--only=fedsgd: exit $code: $(cat "$tmp/only.txt")"

# 5. A variant that validates but fails when it runs (no dataset there): FAILED
# with its log, the other variant's run completes, exit 1. The good one turns its
# page off, which the sweep respects.
cat > "$tmp/failing.sweep.textproto" <<SWEEP
base_spec: "$tiny"
variants { name: "good" set: "output { report: false }" }
variants {
  name: "no_data"
  set: "dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { dir: \"/nonexistent\" } } }"
}
seeds: [1]
metrics { kind: FINAL }
baseline: "good"
jobs: 2
SWEEP
out="$tmp/failing"
"$sweep" --sweep="$tmp/failing.sweep.textproto" --out="$out" > "$tmp/failing.txt" 2>&1
code=$?
[[ $code -eq 1 ]] || fail "failing run: exit $code, expected 1"
grep -qF "FAILED no_data seed 1: see $out/no_data_seed1.log" "$tmp/failing.txt" ||
  { fail "no FAILED line"; cat "$tmp/failing.txt"; }
grep -q "/nonexistent" "$out/no_data_seed1.log" || fail "the log does not say what was missing"
[[ -f "$out/good_seed1/summary.json" ]] || fail "the good run did not finish"
[[ "$(tail -n +2 "$out/runs.csv" | cut -d, -f1,2)" == "good,1" ]] || fail "runs.csv: $(cat "$out/runs.csv")"
grep -qF -- '- `no_data` seed 1: failed, see [no_data_seed1.log](no_data_seed1.log)' "$out/table.md" ||
  fail "table.md does not list the failed run"
grep -qF '<li><code>no_data</code> seed 1: failed, see <a href="no_data_seed1.log">' "$out/report.html" ||
  fail "report.html does not list the failed run"
[[ -f "$out/good_seed1/class_counts.csv" ]] || fail "good run: no class_counts.csv"
[[ -e "$out/good_seed1/report.html" ]] && fail "good run: report.html despite output { report: false }"
grep -qF '<tr><td>good</td><td>finished</td></tr>' "$out/report.html" ||
  fail "report.html: the good run is not shown finished without a link"

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all sweep checks passed"
