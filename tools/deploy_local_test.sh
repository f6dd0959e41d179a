#!/bin/bash
# Deployed runs against the in-process run of the same spec, all on 127.0.0.1:
# - tools/deploy_local (fl_server and 4 fl_client processes over mutual TLS) for 3
#   rounds of FedAvg and of SCAFFOLD (whose clients keep their control variates in
#   their own processes): metrics.csv (but for wall time) and model.pt must be
#   byte-identical, and so after deploy_local is stopped and resumed;
# - FedPer and Ditto, whose clients keep personal tensors or models in their own
#   processes and evaluate their own models when the server asks: metrics.csv,
#   client_acc_* included, is the in-process run's;
# - the server stopped (SIGTERM) and resumed, then killed (SIGKILL) and resumed
#   from the same checkpoint, its clients reconnecting and going back to their
#   state at it: SCAFFOLD's result is still the in-process one, bit for bit;
# - a client killed mid-round: the round completes with the other three (the
#   quorum), the client restarts and rejoins, the run finishes;
# - a client trains on its own data files (--data_dir) instead of its share;
# - a client with a wrong token is refused, and the server says so and counts it.
# Bazel runs this in the runfiles root.
set -uo pipefail

server="$PWD/tools/fl_server"
client="$PWD/tools/fl_client"
runner="$PWD/tools/run_experiment"
launcher="$PWD/tools/deploy_local"
certs="$PWD/fl/deploy/testdata"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
metrics() { cut -d, -f1-10,12- "$1/metrics.csv"; }
# column DIR NAME: the column NAME of DIR/metrics.csv, one value per row (0 when absent).
column() {
  python3 -c 'import csv, sys
for row in csv.DictReader(open(sys.argv[1])): print(row.get(sys.argv[2]) or 0)' "$1/metrics.csv" "$2"
}
rows() { [[ -s "$1/metrics.csv" ]] && echo $(($(wc -l < "$1/metrics.csv") - 1)) || echo 0; }

spec="$tmp/spec.textproto"
cat > "$spec" <<'SPEC'
name: "deploy"
seed: 5
device: CPU
dataset {
  name: "fashion_mnist"
  options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 800 test_limit: 200 } }
}
partition {
  name: "dirichlet"
  num_clients: 4
  options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 0.5 } }
}
model { name: "mlp" options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] } } }
client { steps: 5 batch_size: 16 optimizer { kind: SGD lr: 0.05 } }
server { rounds: 3 clients_per_round: 3 }
simulation { workers: 1 threads_per_worker: 1 }
SPEC
: > "$tmp/tokens.txt"
for k in 0 1 2 3; do
  echo "$k token-$k-$RANDOM$RANDOM" >> "$tmp/tokens.txt"
  awk -v k=$k '$1 == k { print $2 }' "$tmp/tokens.txt" > "$tmp/token$k.txt"
done
tls_server=(--tls_cert="$certs/server.pem" --tls_key="$certs/server.key" --tls_client_ca="$certs/ca.pem")
tls_client=(--tls_ca="$certs/ca.pem" --tls_cert="$certs/client.pem" --tls_key="$certs/client.key")

# in_process NAME SET: the in-process run of the spec with SET, in $tmp/NAME.
in_process() {
  "$runner" --spec="$spec" --set="$2" --output_dir="$tmp/$1" > "$tmp/$1.log" 2>&1 ||
    { fail "$1: in-process run"; tail -20 "$tmp/$1.log"; }
}
# start_server NAME SET [FLAGS...]: fl_server in the background ($server_pid),
# results in $tmp/NAME; waits until it listens ($port).
start_server() {
  local name=$1 set=$2
  shift 2
  rm -f "$tmp/$name.port"
  "$server" --spec="$spec" --set="$set" --output_dir="$tmp/$name" --port_file="$tmp/$name.port" \
      --tokens="$tmp/tokens.txt" "${tls_server[@]}" --task_deadline_seconds=120 \
      --connect_timeout_seconds=120 "$@" >> "$tmp/$name.server.log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 300); do
    [[ -s "$tmp/$name.port" ]] && { port=$(cat "$tmp/$name.port"); return 0; }
    sleep 0.1
  done
  fail "$name: the server did not listen"
  tail -20 "$tmp/$name.server.log"
  return 1
}
# start_client NAME SET K: client K of the run NAME in the background (${client_pids[K]}).
client_pids=()
start_client() {
  "$client" --spec="$spec" --set="$2" --server="localhost:$port" --client_id=$3 \
      --token_file="$tmp/token$3.txt" --state_dir="$tmp/$1.state$3" "${tls_client[@]}" \
      >> "$tmp/$1.client$3.log" 2>&1 &
  client_pids[$3]=$!
}
# finish NAME: waits for the server and the clients; each must exit 0.
finish() {
  wait $server_pid || { fail "$1: the server exited with $?"; tail -20 "$tmp/$1.server.log"; }
  for k in 0 1 2 3; do
    wait ${client_pids[$k]} || { fail "$1: client $k exited with $?"; tail -10 "$tmp/$1.client$k.log"; }
  done
}

for aggregator in fedavg scaffold; do
  set_aggregator="aggregator { name: \"$aggregator\" }"
  in_process "$aggregator" "$set_aggregator"
  before=$failures
  "$launcher" --spec="$spec" --clients=4 --set="$set_aggregator" \
      --output_dir="$tmp/$aggregator.deployed" > "$tmp/$aggregator.deployed.log" 2>&1 ||
    { fail "$aggregator: deploy_local exited with $?"; tail -20 "$tmp/$aggregator.deployed.log"; }
  diff <(metrics "$tmp/$aggregator") <(metrics "$tmp/$aggregator.deployed") ||
    fail "$aggregator: metrics.csv differs from in-process"
  cmp "$tmp/$aggregator/model.pt" "$tmp/$aggregator.deployed/model.pt" ||
    fail "$aggregator: model.pt differs"
  [[ $failures -eq $before ]] && echo "ok $aggregator: deploy_local over mutual TLS, bit for bit"
done

# Personalised FL: the per-client columns come from the clients' own models,
# evaluated in their processes. Without that the server would evaluate the
# global model with its untrained head (FedPer) and the columns would differ.
for aggregator in fedper ditto; do
  set_aggregator="aggregator { name: \"$aggregator\" }"
  in_process "$aggregator" "$set_aggregator"
  before=$failures
  "$launcher" --spec="$spec" --clients=4 --set="$set_aggregator" \
      --output_dir="$tmp/$aggregator.deployed" > "$tmp/$aggregator.deployed.log" 2>&1 ||
    { fail "$aggregator: deploy_local exited with $?"; tail -20 "$tmp/$aggregator.deployed.log"; }
  [[ "$(head -1 "$tmp/$aggregator.deployed/metrics.csv" | awk -F, '{ print $NF }')" == client_eval_failed ]] ||
    fail "$aggregator: the deployed metrics.csv has no client_eval_failed column"
  [[ "$(column "$tmp/$aggregator.deployed" client_eval_failed | sort -u)" == 0 ]] ||
    fail "$aggregator: a client failed to evaluate its own model"
  grep -q client_acc_mean "$tmp/$aggregator/metrics.csv" || fail "$aggregator: no client_acc_* columns"
  diff <(metrics "$tmp/$aggregator") <(metrics "$tmp/$aggregator.deployed" | rev | cut -d, -f2- | rev) ||
    fail "$aggregator: metrics.csv differs from in-process"
  cmp "$tmp/$aggregator/model.pt" "$tmp/$aggregator.deployed/model.pt" ||
    fail "$aggregator: model.pt differs"
  [[ $failures -eq $before ]] &&
    echo "ok $aggregator: deployed, each client evaluating its own model, bit for bit"
done

# Stopping deploy_local (SIGTERM here; Ctrl-C's SIGINT in a terminal, which a
# background job of a script ignores): the server stops after the round, then
# the clients; the same command with --resume finishes the run, bit for bit
# SCAFFOLD's in-process result.
long='aggregator { name: "scaffold" } server { rounds: 40 }'
in_process scaffold40 "$long"
before=$failures
"$launcher" --spec="$spec" --clients=4 --set="$long" --output_dir="$tmp/interrupted" \
    > "$tmp/interrupted.log" 2>&1 &
launcher_pid=$!
for _ in $(seq 600); do [[ $(rows "$tmp/interrupted") -ge 2 ]] && break; sleep 0.02; done
kill -TERM $launcher_pid
signalled=$SECONDS
wait $launcher_pid
code=$?
# Its clients would wait 120 s for the server to come back: it must stop them.
[[ $((SECONDS - signalled)) -lt 60 ]] || fail "stop: deploy_local took $((SECONDS - signalled)) s to stop"
interrupted_after=$(rows "$tmp/interrupted")
[[ $code -eq 3 ]] || { fail "stop: deploy_local exited with $code, expected 3"; tail -5 "$tmp/interrupted.log"; }
[[ $interrupted_after -lt 40 ]] || fail "stop: the run was over before the interruption"
pgrep -f "output_dir=$tmp/interrupted" > /dev/null && fail "stop: processes of the run are left"
"$launcher" --spec="$spec" --clients=4 --set="$long" --output_dir="$tmp/interrupted" --resume \
    > "$tmp/resumed.log" 2>&1 || { fail "stop: the resumed deploy_local exited with $?"; tail -5 "$tmp/resumed.log"; }
diff <(metrics "$tmp/scaffold40") <(metrics "$tmp/interrupted") > /dev/null ||
  fail "stop: metrics.csv differs from the in-process run"
cmp "$tmp/scaffold40/model.pt" "$tmp/interrupted/model.pt" || fail "stop: model.pt differs"
[[ $failures -eq $before ]] &&
  echo "ok stop: deploy_local stopped after round $interrupted_after, resumed; bit for bit"

# The server is stopped (SIGTERM: checkpoint after round r, exit 3, clients told to
# wait), resumed, killed (SIGKILL) rounds later without a newer checkpoint
# (checkpoint_every: 0), and resumed from round r again. SCAFFOLD's clients, which
# all trained in the lost rounds, go back to their state after round r, and the
# result is the uninterrupted in-process run's, bit for bit.
scaffold='aggregator { name: "scaffold" } server { rounds: 12 clients_per_round: 4 }'
in_process scaffold12 "$scaffold"
no_checkpoints="$scaffold output { checkpoint_every: 0 }"
before=$failures
start_server restarted "$no_checkpoints" --listen=127.0.0.1:0 && {
  for k in 0 1 2 3; do start_client restarted "$scaffold" $k; done
  for _ in $(seq 600); do [[ $(rows "$tmp/restarted") -ge 2 ]] && break; sleep 0.02; done
  kill -TERM $server_pid
  wait $server_pid
  code=$?
  stopped_after=$(rows "$tmp/restarted")
  [[ $code -eq 3 ]] || fail "restart: a stopped server exited with $code, expected 3"
  start_server restarted "$no_checkpoints" --listen=127.0.0.1:$port --resume && {
    for _ in $(seq 600); do [[ $(rows "$tmp/restarted") -ge $((stopped_after + 2)) ]] && break; sleep 0.02; done
    kill -KILL $server_pid
    wait $server_pid 2> /dev/null
    killed_after=$(rows "$tmp/restarted")
    [[ $killed_after -lt 12 ]] || fail "restart: the run was over before the server was killed"
    start_server restarted "$no_checkpoints" --listen=127.0.0.1:$port --resume && finish restarted
  }
  diff <(metrics "$tmp/scaffold12") <(metrics "$tmp/restarted") ||
    fail "restart: metrics.csv differs from the uninterrupted in-process run"
  cmp "$tmp/scaffold12/model.pt" "$tmp/restarted/model.pt" || fail "restart: model.pt differs"
  went_back=$(cat "$tmp"/restarted.client*.log | grep -c "back to the hook state after round $stopped_after" || true)
  [[ $went_back -eq 4 ]] || fail "restart: $went_back clients went back to round $stopped_after, expected 4"
  [[ $failures -eq $before ]] && echo "ok restart: stopped after round $stopped_after, resumed, killed after" \
      "round $killed_after, resumed: 4 clients went back; bit for bit"
}

# Client 1 is stopped (SIGSTOP) holding its task of a round, then killed: the
# round completes with the other three (server.min_accepted_updates: 3), client 1
# restarts with its state folder and rejoins, and the run finishes.
quorum='aggregator { name: "scaffold" } server { rounds: 20 clients_per_round: 4 min_accepted_updates: 3 }'
before=$failures
start_server killed "$quorum" --listen=127.0.0.1:0 && {
  for k in 0 1 2 3; do start_client killed "$quorum" $k; done
  for _ in $(seq 600); do [[ $(rows "$tmp/killed") -ge 2 ]] && break; sleep 0.02; done
  kill -STOP ${client_pids[1]}
  sleep 2
  stuck=$(rows "$tmp/killed")
  sleep 1
  [[ $(rows "$tmp/killed") -eq $stuck && $stuck -lt 20 ]] ||
    fail "killed client: the run did not wait for client 1's answer (rows $stuck, then $(rows "$tmp/killed"))"
  kill -KILL ${client_pids[1]}
  wait ${client_pids[1]} 2> /dev/null
  start_client killed "$quorum" 1
  finish killed
  [[ $(rows "$tmp/killed") -eq 20 ]] || fail "killed client: $(rows "$tmp/killed") rounds of 20 ran"
  rejected=$(column "$tmp/killed" rejected_training | awk '{ n += $1 } END { print n + 0 }')
  [[ $rejected -eq 1 ]] || fail "killed client: $rejected training rejections, expected 1"
  [[ $(column "$tmp/killed" clients | sed -n "$((stuck + 1))p") -eq 3 ]] ||
    fail "killed client: round $((stuck + 1)) did not aggregate the other three"
  grep -q "client 1's session ended during task" "$tmp/killed.server.log" ||
    fail "killed client: the server does not say why client 1 failed"
  grep -q "client 1: connected" "$tmp/killed.client1.log" || fail "killed client: client 1 did not rejoin"
  [[ $failures -eq $before ]] &&
    echo "ok killed client: round $((stuck + 1)) completed with 3 of 4, client 1 rejoined, 20 rounds ran"
}

# Client 2 brings its own data: 300 Fashion-MNIST images the spec's 800 do not
# include, written as its own IDX files; it trains on all of them.
own="$tmp/own_data"
mkdir -p "$own"
python3 - /usr/share/datasets/fashion-mnist "$own" 300 <<'PY'
import gzip, sys
source, target, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for split, count in (("train", n), ("t10k", 100)):
    for kind, header, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
        data = gzip.open("%s/%s-%s-ubyte.gz" % (source, split, kind)).read()
        head = bytearray(data[:header])
        head[4:8] = count.to_bytes(4, "big")
        skip = 1000 if split == "train" else 0  # past the spec's train_limit
        body = data[header + skip * size:header + (skip + count) * size]
        gzip.open("%s/%s-%s-ubyte.gz" % (target, split, kind), "wb").write(bytes(head) + body)
PY
everyone='aggregator { name: "fedavg" } server { clients_per_round: 4 }'
before=$failures
start_server own "$everyone" --listen=127.0.0.1:0 && {
  for k in 0 1 3; do start_client own "$everyone" $k; done
  "$client" --spec="$spec" --set="$everyone" --server="localhost:$port" --client_id=2 \
      --token_file="$tmp/token2.txt" --state_dir="$tmp/own.state2" --data_dir="$own" \
      "${tls_client[@]}" > "$tmp/own.client2.log" 2>&1 &
  client_pids[2]=$!
  finish own
  grep -q "fl_client 2: 300 training examples of its own" "$tmp/own.client2.log" ||
    fail "own data: client 2 does not train on its 300 examples"
  [[ "$(column "$tmp/own" clients | sort -u)" == 4 ]] || fail "own data: not every round had 4 clients"
  [[ $failures -eq $before ]] && echo "ok own data: client 2 trained on its own 300 examples in every round"
}

# A wrong token: the client is refused (exit 2) and the server counts it.
echo "token-wrong" > "$tmp/token_wrong.txt"
fedavg='aggregator { name: "fedavg" }'
start_server refused "$fedavg" --listen=127.0.0.1:0 --connect_timeout_seconds=1 && {
  "$client" --spec="$spec" --set="$fedavg" --server="localhost:$port" --client_id=1 \
      --token_file="$tmp/token_wrong.txt" --state_dir="$tmp/refused.state" "${tls_client[@]}" \
      > "$tmp/refused.client.log" 2>&1
  code=$?
  [[ $code -eq 2 ]] || fail "wrong token: the client exited with $code, expected 2"
  grep -q "refused: wrong token" "$tmp/refused.client.log" || fail "wrong token: the client does not say so"
  wait $server_pid
  grep -q "refused 1 x token" "$tmp/refused.server.log" || fail "wrong token: the server did not count it"
  [[ $failures -eq 0 ]] && echo "ok a wrong token is refused and counted"
}

[[ $failures -eq 0 ]] || { echo "$failures failures"; exit 1; }
echo "all deployment checks passed"
