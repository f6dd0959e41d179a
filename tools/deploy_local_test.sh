#!/bin/bash
# A deployed run against the in-process run of the same spec: fl_server and 4
# fl_client processes on 127.0.0.1 over mutual TLS, 3 rounds of FedAvg and of
# SCAFFOLD (whose clients keep their control variates in their own processes).
# metrics.csv (but for wall time) and model.pt must be byte-identical. Then a
# client with a wrong token is refused, and the server says so and counts it.
# Bazel runs this in the runfiles root.
set -uo pipefail

server="$PWD/tools/fl_server"
client="$PWD/tools/fl_client"
runner="$PWD/tools/run_experiment"
certs="$PWD/fl/deploy/testdata"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
metrics() { cut -d, -f1-10,12- "$1/metrics.csv"; }

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

# deploy NAME SET: a server and 4 clients; the clients' exit codes in $tmp/NAME.codes.
deploy() {
  rm -f "$tmp/$1.port"
  "$server" --spec="$spec" --set="$2" --output_dir="$tmp/$1" --listen=127.0.0.1:0 \
      --port_file="$tmp/$1.port" --tokens="$tmp/tokens.txt" "${tls_server[@]}" \
      --task_deadline_seconds=120 --connect_timeout_seconds=120 > "$tmp/$1.server.log" 2>&1 &
  local server_pid=$! port="" pids=() k
  for _ in $(seq 300); do
    [[ -s "$tmp/$1.port" ]] && { port=$(cat "$tmp/$1.port"); break; }
    sleep 0.1
  done
  [[ -n $port ]] || { fail "$1: the server did not listen"; kill $server_pid; tail -20 "$tmp/$1.server.log"; return 1; }
  for k in 0 1 2 3; do
    "$client" --spec="$spec" --set="$2" --server="localhost:$port" --client_id=$k \
        --token_file="$tmp/token$k.txt" "${tls_client[@]}" > "$tmp/$1.client$k.log" 2>&1 &
    pids+=($!)
  done
  wait $server_pid || { fail "$1: the server exited with $?"; tail -20 "$tmp/$1.server.log"; }
  for k in 0 1 2 3; do
    wait ${pids[$k]} || { fail "$1: client $k exited with $?"; tail -10 "$tmp/$1.client$k.log"; }
  done
}

for aggregator in fedavg scaffold; do
  set_aggregator="aggregator { name: \"$aggregator\" }"
  "$runner" --spec="$spec" --set="$set_aggregator" --output_dir="$tmp/$aggregator" \
      > "$tmp/$aggregator.log" 2>&1 || { fail "$aggregator: in-process run"; tail -20 "$tmp/$aggregator.log"; }
  before=$failures
  deploy "$aggregator.deployed" "$set_aggregator"
  diff <(metrics "$tmp/$aggregator") <(metrics "$tmp/$aggregator.deployed") ||
    fail "$aggregator: metrics.csv differs from in-process"
  cmp "$tmp/$aggregator/model.pt" "$tmp/$aggregator.deployed/model.pt" ||
    fail "$aggregator: model.pt differs"
  [[ $failures -eq $before ]] && echo "ok $aggregator: deployed over TLS, bit for bit"
done

# A wrong token: the client is refused (exit 2) and the server counts it.
echo "token-wrong" > "$tmp/token_wrong.txt"
rm -f "$tmp/refused.port"
fedavg='aggregator { name: "fedavg" }'
"$server" --spec="$spec" --set="$fedavg" --output_dir="$tmp/refused" --listen=127.0.0.1:0 \
    --port_file="$tmp/refused.port" --tokens="$tmp/tokens.txt" "${tls_server[@]}" \
    --connect_timeout_seconds=1 > "$tmp/refused.server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do [[ -s "$tmp/refused.port" ]] && break; sleep 0.1; done
"$client" --spec="$spec" --set="$fedavg" --server="localhost:$(cat "$tmp/refused.port")" --client_id=1 \
    --token_file="$tmp/token_wrong.txt" "${tls_client[@]}" > "$tmp/refused.client.log" 2>&1
code=$?
[[ $code -eq 2 ]] || fail "wrong token: the client exited with $code, expected 2"
grep -q "refused: wrong token" "$tmp/refused.client.log" || fail "wrong token: the client does not say so"
wait $server_pid
grep -q "refused 1 x token" "$tmp/refused.server.log" || fail "wrong token: the server did not count it"
[[ $failures -eq 0 ]] && echo "ok a wrong token is refused and counted"

[[ $failures -eq 0 ]] || { echo "$failures failures"; exit 1; }
echo "all deployment checks passed"
