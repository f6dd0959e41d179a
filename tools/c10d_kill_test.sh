#!/bin/bash
# A distributed run whose rank dies or stalls must end within its c10d timeout,
# every surviving process failing with an error that names the rank and the
# round, never hanging. Three processes started by hand with PyTorch's variables
# (as a multi-host launch would); then one is killed (SIGKILL) mid-run, and in a
# second run one is frozen (SIGSTOP). The killed run then resumes from its last
# checkpoint with three new processes. Bazel runs this in the runfiles root.
set -uo pipefail

runner="$PWD/tools/run_experiment"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
timeout_seconds=8

spec="$tmp/spec.textproto"
cat > "$spec" <<SPEC
name: "c10d_kill"
seed: 3
device: CPU
dataset {
  name: "fashion_mnist"
  options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 1200 test_limit: 300 } }
}
partition { name: "iid" num_clients: 6 }
model { name: "mlp" options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] } } }
client { steps: 20 batch_size: 16 optimizer { kind: SGD lr: 0.05 } }
server { rounds: 100000 clients_per_round: 6 }
aggregator { name: "fedavg" }
simulation { workers: 1 threads_per_worker: 1 backend: C10D c10d { timeout_seconds: $timeout_seconds } }
output { checkpoint_every: 1 }
SPEC
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# trial NAME VICTIM SIGNAL: starts 3 ranks, waits for 2 rounds, signals VICTIM.
trial() {
  local name="$1" victim="$2" signal="$3" master_port
  master_port=$(port)
  local pids=()
  for rank in 0 1 2; do
    RANK=$rank WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port \
      "$runner" --spec="$spec" --output_dir="$tmp/$name" > "$tmp/$name.$rank.log" 2>&1 &
    pids+=($!)
  done
  local waited=0
  until [[ $(cat "$tmp/$name/metrics.csv" 2> /dev/null | wc -l) -ge 3 ]]; do
    sleep 0.2
    waited=$((waited + 1))
    if [[ $waited -gt 600 ]]; then fail "$name: no 2 rounds in 120 s"; kill -9 "${pids[@]}"; return; fi
  done
  sleep 0.$((RANDOM % 9 + 1))  # somewhere inside a round
  kill -"$signal" "${pids[$victim]}"
  local start=$SECONDS
  for rank in 0 1 2; do
    [[ $rank -eq $victim ]] && continue
    # Each survivor must be gone within the timeout plus the time to diagnose.
    local limit=$((start + timeout_seconds + 15))
    while kill -0 "${pids[$rank]}" 2> /dev/null && [[ $SECONDS -lt $limit ]]; do sleep 0.2; done
    if kill -0 "${pids[$rank]}" 2> /dev/null; then
      fail "$name: rank $rank still running $((SECONDS - start)) s after rank $victim was stopped"
      kill -9 "${pids[$rank]}"
      continue
    fi
    wait "${pids[$rank]}"
    local code=$?
    [[ $code -ne 0 ]] || fail "$name: rank $rank exited with 0"
    if ! grep -Eq "rank $victim is not answering|rank 0, which holds the rendezvous store" "$tmp/$name.$rank.log" ||
       ! grep -Eq "round [0-9]+" "$tmp/$name.$rank.log"; then
      fail "$name: rank $rank's error does not name rank $victim and the round:"
      tail -5 "$tmp/$name.$rank.log"
    else
      echo "ok $name: rank $rank exited ($code) after $((SECONDS - start)) s:"
      grep -E "not answering|rendezvous store" "$tmp/$name.$rank.log" | head -1
    fi
  done
  kill -9 "${pids[$victim]}" 2> /dev/null
  wait 2> /dev/null
}

trial killed 1 KILL
trial frozen 2 STOP

# The killed run continues from its last checkpoint, two rounds further.
done_rows=$(($(wc -l < "$tmp/killed/metrics.csv") - 1))
target=$((done_rows + 2))
master_port=$(port)
pids=()
for rank in 0 1 2; do
  RANK=$rank WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port \
    "$runner" --resume="$tmp/killed" --set="server { rounds: $target }" > "$tmp/resumed.$rank.log" 2>&1 &
  pids+=($!)
done
for rank in 0 1 2; do
  wait "${pids[$rank]}" || { fail "resumed rank $rank failed"; tail -5 "$tmp/resumed.$rank.log"; }
done
rows=$(($(wc -l < "$tmp/killed/metrics.csv") - 1))
[[ $rows -eq $target ]] || fail "the resumed run has $rows rounds in metrics.csv, expected $target"
echo "ok resumed after the kill: $rows rounds"

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo PASS
