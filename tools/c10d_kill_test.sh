#!/bin/bash
# A distributed run whose rank dies or stalls must end within its c10d timeout,
# every surviving process failing with an error line that names the rank and the
# round it was in, never hanging. Three processes started by hand with PyTorch's
# variables (as a multi-host launch would); one is killed (SIGKILL) mid-run: rank
# 1, then rank 0, which holds the rendezvous store; then one is frozen (SIGSTOP):
# rank 2, then rank 0. LibTorch 1.13's store serves one request at a time and
# blocks for good on a rank stopped part-way through one: that is emulated by a
# client that sends half a request, once while a rank is frozen (the survivors
# must still end, blaming the victim or the blocked store), and in runs that
# must still finish and exit cleanly: blocked from round 2, and blocked as rank 0
# closes its store. Each killed run resumes from its last checkpoint with three
# new processes and must end bit for bit as an uninterrupted run of as many rounds
# (merge GATHER, which is the in-process run exactly). Bazel runs this in the
# runfiles root.
set -uo pipefail

runner="$PWD/tools/run_experiment"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
source "$PWD/tools/c10d_test_lib.sh"
timeout_seconds=8

# Kept momentum is client state that lives on its owning rank between rounds and
# in the checkpoint, so the resumed runs check its way through a kill too.
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
client {
  steps: 20
  batch_size: 16
  optimizer { kind: SGD lr: 0.05 momentum: 0.9 }
  keep_optimizer_state: true
}
server { rounds: 100000 clients_per_round: 6 }
aggregator { name: "fedavg" }
simulation { workers: 1 threads_per_worker: 1 backend: C10D c10d { timeout_seconds: $timeout_seconds } }
output { checkpoint_every: 1 }
SPEC
gather='simulation { c10d { merge: GATHER } }'
# block_store PORT: sends the first byte of a request and no more, on a
# connection held open in the file descriptor `blocker` until unblock.
block_store() { exec {blocker}<> "/dev/tcp/127.0.0.1/$1" && printf '\0' >&"$blocker"; }
unblock() { [[ -n "$blocker" ]] && exec {blocker}>&-; blocker=; }
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# trial NAME VICTIM SIGNAL SET [BLOCK]: starts 3 ranks, waits for 2 rounds,
# blocks the store if BLOCK is set, signals VICTIM somewhere inside a round, and
# checks what the others do.
trial() {
  local name="$1" victim="$2" signal="$3" set="$4" block="${5:-}" master_port
  master_port=$(port)
  local pids=()
  for rank in 0 1 2; do
    RANK=$rank WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port \
      "$runner" --spec="$spec" --output_dir="$tmp/$name" --set="$set" > "$tmp/$name.$rank.log" 2>&1 &
    pids+=($!)
  done
  local waited=0
  until [[ $(cat "$tmp/$name/metrics.csv" 2> /dev/null | wc -l) -ge 3 ]]; do
    sleep 0.2
    waited=$((waited + 1))
    if [[ $waited -gt 600 ]]; then fail "$name: no 2 rounds in 120 s"; kill -9 "${pids[@]}"; return; fi
  done
  sleep 0.$((RANDOM % 9 + 1))
  local blocker=
  [[ -n "$block" ]] && block_store "$master_port"
  kill -"$signal" "${pids[$victim]}"
  local start=$SECONDS
  # The survivor's own error line: "rank R at round N: ..." and, in that same
  # line, the victim named (a rank 0 that ended after another rank's failure
  # passes that report on, so the victim is still named).
  local store="rank 0, which holds the rendezvous store at 127\.0\.0\.1:$master_port, is not answering"
  local named="rank $victim is not answering"
  [[ $victim -eq 0 ]] && named="$store"
  # A store blocked by a half-sent request (the emulated one, or the frozen
  # victim's own on LibTorch 1.13) cannot say who stopped; each survivor says so.
  [[ $signal == STOP && $victim -ne 0 ]] &&
    named="($named|$store \(dead or stopped, or its store blocked by a rank stopped part-way through a request\)|the rendezvous store this rank holds is not answering \(blocked)"
  for rank in 0 1 2; do
    [[ $rank -eq $victim ]] && continue
    # Each survivor must be gone within the timeout plus the time to diagnose.
    local limit=$((start + timeout_seconds + 15))
    while kill -0 "${pids[$rank]}" 2> /dev/null && [[ $SECONDS -lt $limit ]]; do sleep 0.2; done
    if kill -0 "${pids[$rank]}" 2> /dev/null; then
      fail "$name: rank $rank still running $((SECONDS - start)) s after rank $victim was stopped"
      tail -3 "$tmp/$name.$rank.log"
      kill -9 "${pids[$rank]}"
      continue
    fi
    wait "${pids[$rank]}"
    local code=$?
    [[ $code -ne 0 ]] || fail "$name: rank $rank exited with 0"
    local line
    line=$(grep -E "^  rank $rank at round [0-9]+: .*$named" "$tmp/$name.$rank.log" | head -1)
    if [[ -z "$line" ]]; then
      fail "$name: rank $rank has no error line naming its round and rank $victim:"
      tail -5 "$tmp/$name.$rank.log"
    else
      echo "ok $name: rank $rank exited ($code) after $((SECONDS - start)) s:"
      echo "$line"
    fi
  done
  kill -CONT "${pids[$victim]}" 2> /dev/null
  kill -9 "${pids[$victim]}" 2> /dev/null
  unblock
  wait 2> /dev/null
}

# blocked_run NAME WHEN: a store blocked while the run still needs it no more
# must neither stop the run nor keep rank 0 from exiting (its store's serving
# thread never ends). WHEN: "round2", from round 2 on; "exit", as rank 0 has
# written its last checkpoint and ends its collective, which then closes the
# store while the request arrives (before the store closed with a deadline,
# rank 0 hung in 3 of 3 such runs, and in 7 of 10 with the request 0-30 ms later).
blocked_run() {
  local name="$1" when="$2" master_port pids=() blocker= before=$failures
  master_port=$(port)
  for rank in 0 1 2; do
    RANK=$rank WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port \
      "$runner" --spec="$spec" --output_dir="$tmp/$name" --set="server { rounds: 12 }" \
      > "$tmp/$name.$rank.log" 2>&1 &
    pids+=($!)
  done
  local waited=0
  if [[ $when == round2 ]]; then
    until [[ $(cat "$tmp/$name/metrics.csv" 2> /dev/null | wc -l) -ge 3 ]]; do
      sleep 0.2
      waited=$((waited + 1))
      if [[ $waited -gt 600 ]]; then fail "$name: no 2 rounds in 120 s"; kill -9 "${pids[@]}"; return; fi
    done
  else
    until grep -q "checkpoint after round 12" "$tmp/$name.0.log"; do
      sleep 0.01
      waited=$((waited + 1))
      if [[ $waited -gt 12000 ]]; then fail "$name: no 12 rounds in 120 s"; kill -9 "${pids[@]}"; return; fi
    done
  fi
  if ! block_store "$master_port" 2> /dev/null; then
    # Only rank 0's exit can have closed the store first: nothing was tested.
    [[ $when == exit ]] || fail "$name: the store refused the blocking request"
    echo "note $name: the store had closed before the request reached it"
  fi
  local start=$SECONDS
  for rank in 0 1 2; do
    while kill -0 "${pids[$rank]}" 2> /dev/null && [[ $SECONDS -lt $((start + 60)) ]]; do sleep 0.2; done
    if kill -0 "${pids[$rank]}" 2> /dev/null; then
      fail "$name: rank $rank still running $((SECONDS - start)) s after the store was blocked"
      tail -3 "$tmp/$name.$rank.log"
      kill -9 "${pids[$rank]}"
    elif ! wait "${pids[$rank]}"; then
      fail "$name: rank $rank failed"
      tail -3 "$tmp/$name.$rank.log"
    fi
  done
  unblock
  wait 2> /dev/null
  has_rounds "$tmp/$name" 12 "$name" && [[ $failures -eq $before ]] &&
    echo "ok $name: 12 rounds, every rank exited 0 within $((SECONDS - start)) s of the block"
}

# resume NAME: the killed run continues from its last checkpoint to two rounds
# past the rows it had written, and must equal an uninterrupted in-process run
# of as many rounds: metrics.csv (bar wall time) and model.pt byte for byte.
resume() {
  local name="$1" target pids=()
  target=$(($(tail -n +2 "$tmp/$name/metrics.csv" | wc -l) + 2))
  local master_port
  master_port=$(port)
  for rank in 0 1 2; do
    RANK=$rank WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$master_port \
      "$runner" --resume="$tmp/$name" --set="server { rounds: $target } $gather" \
      > "$tmp/$name.resumed.$rank.log" 2>&1 &
    pids+=($!)
  done
  for rank in 0 1 2; do
    wait "${pids[$rank]}" || { fail "$name: resumed rank $rank failed"; tail -5 "$tmp/$name.resumed.$rank.log"; }
  done
  local reference="$tmp/uninterrupted.$target"
  [[ -d "$reference" ]] ||
    "$runner" --spec="$spec" --output_dir="$reference" \
      --set="server { rounds: $target } simulation { backend: IN_PROCESS }" > "$reference.log" 2>&1 ||
    { fail "$name: the uninterrupted run"; tail -5 "$reference.log"; return; }
  has_rounds "$tmp/$name" "$target" "$name resumed" || return
  local before=$failures
  diff <(metrics "$reference") <(metrics "$tmp/$name") ||
    fail "$name: metrics.csv differs from the uninterrupted run's"
  cmp "$reference/model.pt" "$tmp/$name/model.pt" || fail "$name: model.pt differs"
  [[ $failures -eq $before ]] && echo "ok $name: resumed to $target rounds, bit for bit the uninterrupted run"
}

trial killed1 1 KILL "$gather"
trial killed0 0 KILL "$gather"
trial frozen2 2 STOP ''      # merge AUTO: the partial sums' all-reduce times out
trial frozen0 0 STOP ''
trial blocked2 2 STOP '' block
blocked_run blocked_run round2
for attempt in 1 2 3; do blocked_run "blocked_exit$attempt" exit; done
resume killed1
resume killed0

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo PASS
