#!/bin/bash
# dp_accountant from the command line: TF Privacy's DP-SGD example, the noise
# search round trip, and exit code 2 with one line naming the flag for every
# command-line mistake. Bazel runs this in the runfiles root.
set -uo pipefail

tool=tools/dp_accountant
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# run NAME EXIT_CODE ARGS...: runs the tool, checks its exit code; output in $out.
run() {
  local name="$1" code="$2"
  shift 2
  out="$("$tool" "$@" 2>&1)"
  local got=$?
  if [[ $got -ne $code ]]; then fail "$name: exit $got, expected $code"; echo "$out"; return 1; fi
  return 0
}

# expect_line NAME PATTERN: the first line of $out starts with PATTERN (fixed string).
expect_line() {
  if [[ "$(head -n 1 <<<"$out")" != "$2"* ]]; then
    fail "$1: first line is not \"$2...\""; echo "$out"; return 1
  fi
  echo "ok   $1"
}

# TF Privacy's compute_dp_sgd_privacy_test, Test0: 60000 examples, batch 150,
# sigma 1.3, 15 epochs (6000 steps), delta 1e-5: epsilon 0.7242234026109595 at
# order 19 (CKS conversion, its current value) and 0.941870567 (classic
# conversion, its early releases' value).
mnist=(--sampling_rate=0.0025 --steps=6000 --delta=1e-5)
run tf_privacy_cks 0 "${mnist[@]}" --noise_multiplier=1.3 &&
  expect_line tf_privacy_cks "epsilon 0.724223402611 at order 19"
run tf_privacy_classic 0 "${mnist[@]}" --noise_multiplier=1.3 --conversion=classic &&
  expect_line tf_privacy_classic "epsilon 0.941870567"

# The search backwards: the noise for that epsilon is 1.3 (to the search's 1e-6
# relative tolerance, plus the printed value's upward rounding), and the printed
# noise multiplier, run forwards, meets the target.
check_round_trip() {
  local name="$1" target="$2" expected_z="$3"
  shift 3
  run "$name" 0 "$@" --target_epsilon="$target" || return
  local z
  z=$(sed -nE 's/^noise_multiplier ([0-9.e+-]+) .*/\1/p' <<<"$out")
  if [[ -z "$z" ]]; then fail "$name: no noise_multiplier printed"; echo "$out"; return; fi
  if [[ -n "$expected_z" ]] &&
    ! awk -v z="$z" -v e="$expected_z" 'BEGIN { exit !(z >= e && z <= e * (1 + 3e-6)) }'; then
    fail "$name: noise_multiplier $z, expected $expected_z"; return
  fi
  run "$name (forwards)" 0 "$@" --noise_multiplier="$z" || return
  local eps
  eps=$(sed -nE 's/^epsilon ([0-9.e+-]+) at order .*/\1/p' <<<"$out")
  if ! awk -v eps="$eps" -v t="$target" 'BEGIN { exit !(eps != "" && eps <= t) }'; then
    fail "$name: noise_multiplier $z gives epsilon $eps > target $target"; return
  fi
  echo "ok   $name (z = $z, epsilon $eps <= $target)"
}
check_round_trip round_trip_tf_privacy 0.7242234026109595 1.3 "${mnist[@]}"
check_round_trip round_trip_fixed_size 3 "" --sampling_rate=0.01 --steps=1000 --delta=1e-5 \
  --sampling=fixed_size

# The PLD accountant on the same run: dp_accounting 0.6.0's PLDAccountant gives
# 0.6401109264445614 (connect the dots, grid 1e-4); this one agrees to 1e-9.
run pld_tf_privacy 0 "${mnist[@]}" --noise_multiplier=1.3 --accountant=pld &&
  expect_line pld_tf_privacy "epsilon 0.6401109"
run pld_search 0 "${mnist[@]}" --target_epsilon=0.6401109264445614 --accountant=pld &&
  expect_line pld_search "noise_multiplier 1.30000"

run unreachable_target 1 --sampling_rate=1 --steps=1000000 --delta=1e-5 --target_epsilon=1e-4 &&
  expect_line unreachable_target \
    "--target_epsilon: 0.0001 cannot be met with noise_multiplier <= 10000"

# Command-line mistakes: exit 2 and exactly one line, naming the flag.
bad_flag() {
  local name="$1" message="$2"
  shift 2
  run "$name" 2 "$@" || return
  if [[ "$(wc -l <<<"$out")" -ne 1 ]]; then
    fail "$name: more than one line"; echo "$out"; return
  fi
  expect_line "$name" "$message"
}
ok=(--sampling_rate=0.01 --noise_multiplier=1 --steps=100 --delta=1e-5)
bad_flag rate_out_of_range "--sampling_rate: must be in [0, 1], got 1.5" \
  --sampling_rate=1.5 --noise_multiplier=1 --steps=100 --delta=1e-5
bad_flag rate_not_a_number '--sampling_rate: must be a number, got "abc"' \
  --sampling_rate=abc --noise_multiplier=1 --steps=100 --delta=1e-5
bad_flag negative_noise "--noise_multiplier: must be finite and >= 0, got -1" \
  --sampling_rate=0.01 --noise_multiplier=-1 --steps=100 --delta=1e-5
bad_flag steps_not_an_integer '--steps: must be an integer, got "1.5"' \
  --sampling_rate=0.01 --noise_multiplier=1 --steps=1.5 --delta=1e-5
bad_flag delta_out_of_range "--delta: must be in (0, 1), got 2" \
  --sampling_rate=0.1 --noise_multiplier=1 --steps=100 --delta=2
bad_flag bad_target "--target_epsilon: must be finite and > 0, got 0" \
  --sampling_rate=0.01 --target_epsilon=0 --steps=100 --delta=1e-5
bad_flag unknown_sampling '--sampling: must be poisson or fixed_size, got "uniform"' \
  "${ok[@]}" --sampling=uniform
bad_flag unknown_conversion '--conversion: must be cks or classic, got "rdp"' \
  "${ok[@]}" --conversion=rdp
bad_flag missing_delta "--delta: required" --sampling_rate=0.01 --noise_multiplier=1 --steps=100
bad_flag neither_noise_nor_target "--noise_multiplier: required, or --target_epsilon instead" \
  --sampling_rate=0.01 --steps=100 --delta=1e-5
bad_flag both_noise_and_target "--target_epsilon: give it or --noise_multiplier, not both" \
  "${ok[@]}" --target_epsilon=1
bad_flag unknown_accountant '--accountant: must be rdp or pld, got "moments"' \
  "${ok[@]}" --accountant=moments
bad_flag pld_fixed_size "--accountant: pld covers --sampling=poisson only" \
  "${ok[@]}" --accountant=pld --sampling=fixed_size
bad_flag pld_conversion "--conversion: RDP's; --accountant=pld converts nothing" \
  "${ok[@]}" --accountant=pld --conversion=classic
bad_flag rdp_grid "--value_discretization_interval: only read with --accountant=pld" \
  "${ok[@]}" --value_discretization_interval=1e-3
bad_flag pld_grid "--value_discretization_interval: must be > 0 and finite, got 0" \
  "${ok[@]}" --accountant=pld --value_discretization_interval=0
bad_flag unknown_flag "unknown flag --noise" "${ok[@]}" --noise=2
bad_flag flag_without_value "--conversion: needs a value" "${ok[@]}" --conversion
bad_flag positional_argument 'unexpected argument "extra"' "${ok[@]}" extra

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
echo "all dp_accountant checks passed"
