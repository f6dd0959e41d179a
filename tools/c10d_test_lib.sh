# Comparisons shared by the c10d tests, sourced after they set `model_diff` and
# define fail(). Each fails closed: a missing file, a tool that fails or prints
# something unexpected is a failure, never an empty value that compares as equal.

# metrics.csv without its wall-time column; and only the counters (by name: the
# columns after the clocks mix an aggregator's float diagnostics with the
# rejection counters).
metrics() { cut -d, -f1-10,12- "$1/metrics.csv"; }
counters() {
  awk -F, 'NR == 1 {
             for (i = 1; i <= NF; i++) {
               keep[i] = $i ~ /^(round|clients|rejected|incomplete|dropped|bytes_up|bytes_down|virtual_seconds|rejected_.*)$/
             }
           }
           { row = ""; for (i = 1; i <= NF; i++) if (keep[i]) row = row $i ","; print row }' "$1/metrics.csv"
}
# The client_acc_* columns (by name), with a header that names them; nothing
# when the run has none.
client_accuracy() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = $i ~ /^client_acc_/ }
           { row = ""; for (i = 1; i <= NF; i++) if (keep[i]) row = row $i ","; print row }' "$1/metrics.csv"
}

# has_rounds DIR ROUNDS WHAT: DIR/metrics.csv exists with a row for each round.
has_rounds() {
  local rows
  rows=$(tail -n +2 "$1/metrics.csv" 2> /dev/null | wc -l)
  [[ -f "$1/metrics.csv" && $rows -eq $2 ]] && return 0
  fail "$3: $1/metrics.csv has $rows rounds (or is missing), expected $2"
  return 1
}

# weight_diff A.pt B.pt WHAT: sets `weight_diff` to the largest absolute weight
# difference model_diff reports, or fails and returns 1.
weight_diff=""
weight_diff() {
  local out file
  weight_diff=""
  for file in "$1" "$2"; do
    [[ -s "$file" ]] || { fail "$3: $file is missing or empty"; return 1; }
  done
  out=$("$model_diff" "$1" "$2" 2>&1)
  local code=$?
  if [[ $code -ne 0 ]]; then
    fail "$3: model_diff exited with $code: $out"
    return 1
  fi
  # %.9g of a finite non-negative number; nan and inf do not match.
  if ! [[ "$out" =~ ^max_abs_diff\ ([0-9]+(\.[0-9]+)?(e[-+][0-9]+)?)\  ]]; then
    fail "$3: model_diff printed no difference: \"$out\""
    return 1
  fi
  weight_diff="${BASH_REMATCH[1]}"
}

# at_most X LIMIT: X <= LIMIT, both validated numbers.
at_most() { awk -v x="$1" -v limit="$2" 'BEGIN { exit !(x + 0 <= limit + 0) }'; }
