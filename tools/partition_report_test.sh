#!/bin/bash
# partition_counts / partition_report on FedProx's synthetic data (no files needed):
# counts.csv matches the partition, errors exit with their codes, and the picture
# is drawn when matplotlib is there. Bazel runs this in the runfiles root.
set -uo pipefail

tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

spec="$tmp/synthetic.textproto"
cat > "$spec" <<'SPEC'
name: "partition_report_test"
seed: 3
dataset {
  name: "synthetic_leaf"
  options { [type.googleapis.com/fedkit.data.SyntheticLeafOptions] { alpha: 1 beta: 1 num_clients: 12 } }
}
partition { name: "natural" num_clients: 12 }
SPEC

# Natural partition: one client per device, every training example assigned once.
out="$tmp/natural"
if ! tools/partition_counts --spec="$spec" --out="$out" > "$tmp/natural.log" 2>&1; then
  fail "natural: exit $?"; cat "$tmp/natural.log"
fi
train=$(sed -nE 's/^dataset synthetic_leaf: ([0-9]+) training examples.*/\1/p' "$out/summary.txt")
[[ -n "$train" ]] || fail "summary.txt lacks the training-set size"
[[ "$(head -n 1 "$out/counts.csv")" == "client,0,1,2,3,4,5,6,7,8,9" ]] || fail "counts.csv header"
[[ "$(wc -l < "$out/counts.csv")" -eq 13 ]] || fail "counts.csv should have 12 client rows"
# Column 1 is 0..11 in order, and the counts add up to the whole training set.
ids=$(tail -n +2 "$out/counts.csv" | cut -d, -f1 | tr '\n' ' ')
[[ "$ids" == "0 1 2 3 4 5 6 7 8 9 10 11 " ]] || fail "client ids: $ids"
sum=$(tail -n +2 "$out/counts.csv" | awk -F, '{for (i = 2; i <= NF; ++i) s += $i} END {print s}')
[[ "$sum" == "$train" ]] || fail "counts add up to $sum, training set has $train"
# FedProx's devices keep floor(0.9 * n_k) >= 45 training examples each.
small=$(tail -n +2 "$out/counts.csv" | awk -F, '{s = 0; for (i = 2; i <= NF; ++i) s += $i; if (s < 45) print $1}')
[[ -z "$small" ]] || fail "clients under 45 examples: $small"
grep -q "^12 clients, $train examples$" "$out/summary.txt" || fail "summary headline"
grep -q "^client sizes: min " "$out/summary.txt" || fail "summary sizes line"

# Same spec, same counts: the partition is seeded.
tools/partition_counts --spec="$spec" --out="$tmp/again" > /dev/null 2>&1
cmp -s "$out/counts.csv" "$tmp/again/counts.csv" || fail "a second run gave other counts"

# FedAvg-style sorted shards, 2 per client: every example used, 16 near-equal
# shards, so every client holds 2 * floor(N / 16) to 2 * ceil(N / 16) examples.
tools/partition_counts --spec="$spec" --out="$tmp/shards" \
  --set='partition { name: "shards" num_clients: 8 options { [type.googleapis.com/fedkit.data.ShardsOptions] { shards_per_client: 2 } } }' \
  > "$tmp/shards.log" 2>&1 || { fail "shards: exit $?"; cat "$tmp/shards.log"; }
bad_rows=$(tail -n +2 "$tmp/shards/counts.csv" | awk -F, -v n="$train" \
  '{s = 0; for (i = 2; i <= NF; ++i) s += $i; if (s < 2 * int(n / 16) || s > 2 * int((n + 15) / 16)) print $1}')
[[ -z "$bad_rows" && "$(wc -l < "$tmp/shards/counts.csv")" -eq 9 ]] || fail "shards rows: $bad_rows"
sum=$(tail -n +2 "$tmp/shards/counts.csv" | awk -F, '{for (i = 2; i <= NF; ++i) s += $i} END {print s}')
[[ "$sum" == "$train" ]] || fail "shards use $sum examples, training set has $train"

# More clients than devices: the partitioner's message, exit 1.
msg=$(tools/partition_counts --spec="$spec" --out="$tmp/x" --set='partition { num_clients: 13 }' 2>&1)
code=$?
[[ $code -eq 1 ]] || fail "13 clients: exit $code, expected 1"
grep -qF "partition (natural): num_clients: 13 but the training set has 12 owners" <<<"$msg" \
  || fail "13 clients message: $msg"

# An unknown partitioner is a spec error, exit 2.
msg=$(tools/partition_counts --spec="$spec" --out="$tmp/x" --set='partition { name: "nope" }' 2>&1)
code=$?
[[ $code -eq 2 ]] || fail "unknown partitioner: exit $code, expected 2"
grep -qF "partition (nope): " <<<"$msg" || fail "unknown partitioner message: $msg"

# The whole report, picture included where matplotlib is installed.
report="$tmp/report"
if ! tools/partition_report --spec "$spec" --out "$report" > "$tmp/report.log" 2>&1; then
  fail "partition_report: exit $?"; cat "$tmp/report.log"
fi
cmp -s "$out/counts.csv" "$report/counts.csv" || fail "partition_report wrote other counts"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  [[ "$(head -c 4 "$report/partition.png" | tail -c 3)" == "PNG" ]] || fail "no partition.png"
else
  echo "matplotlib absent: partition.png not checked"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all partition report checks passed"
