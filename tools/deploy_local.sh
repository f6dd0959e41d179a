#!/bin/bash
# A deployed run on this machine: fl_server and N fl_client processes on
# 127.0.0.1 over mutual TLS, each client with its own token and hook-state
# folder, as on N machines (docs/deployment.md; for real machines start the same
# commands by hand).
#
#   bazel run //tools:deploy_local -- --spec=SPEC --clients=N [--set=FRAGMENT] \
#       [--output_dir=DIR] [--resume] [--task_deadline_seconds=S]
#
# The spec runs with partition.num_clients = N. Results go to DIR (default: the
# spec's output.dir, else results/<name>); credentials, client states and every
# process's log go to DIR/deployment. The server's log is shown, prefixed
# [server]; SIGINT or SIGTERM stops the server after the round in progress, and
# then the clients (continue with --resume). Exits with the server's code (0 done, 1 failed, 2
# bad input, 3 stopped), or 4 when the server succeeded but a client did not.
set -uo pipefail

spec=""
clients=""
set_fragment=""
output_dir=""
server_args=()
for arg in "$@"; do
  case "$arg" in
    --spec=*) spec="${arg#*=}" ;;
    --clients=*) clients="${arg#*=}" ;;
    --set=*) set_fragment="${arg#*=}" ;;
    --output_dir=*) output_dir="${arg#*=}" ;;
    --resume | --task_deadline_seconds=* | --connect_timeout_seconds=*) server_args+=("$arg") ;;
    *) echo "deploy_local: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [[ -z "$spec" ]] || ! [[ "$clients" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: deploy_local --spec=SPEC --clients=N [--set=FRAGMENT] [--output_dir=DIR] [--resume]" >&2
  exit 2
fi
from_user_dir() {
  if [[ "$1" = /* || -z "${BUILD_WORKING_DIRECTORY:-}" ]]; then echo "$1"; else echo "$BUILD_WORKING_DIRECTORY/$1"; fi
}
spec=$(from_user_dir "$spec")
[[ -r "$spec" ]] || { echo "deploy_local: cannot read --spec=$spec" >&2; exit 2; }
if [[ -z "$output_dir" ]]; then
  # The spec's output.dir, else results/<name>, the --set fragment's over the file's.
  output_dir=$(python3 - "$spec" "$set_fragment" <<'PY'
import re, sys
found = {}
for text in (open(sys.argv[1]).read(), sys.argv[2]):
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|#[^\n]*|[{}:]|[\w.\[\]/]+', text)
    path, last = [], None
    for i, token in enumerate(tokens):
        if token.startswith("#") or token == ":":
            continue
        if token == "{":
            path.append(last)
        elif token == "}":
            path = path[:-1]
        elif token.startswith('"') and last in ("dir", "name"):
            key = ".".join(path + [last])
            if key in ("output.dir", "name"):
                found[key] = token[1:-1]
        last = token
print(found.get("output.dir") or "results/" + found.get("name", "deploy_local"))
PY
)
fi
output_dir=$(from_user_dir "$output_dir")
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin() {  # a sibling binary under bazel run, or under bazel test's runfiles
  if [[ -x "$here/$1" ]]; then echo "$here/$1"; else echo "$PWD/tools/$1"; fi
}
work="$output_dir/deployment"
mkdir -p "$work/logs"
set_fragment="$set_fragment partition { num_clients: $clients }"
if [[ ! -e "$work/credentials/ca.pem" ]]; then
  "$(bin deploy_credentials)" --out="$work/credentials" --clients="$clients" > /dev/null || exit 2
fi
credentials="$work/credentials"
[[ -e "$credentials/token$((clients - 1)).txt" ]] ||
  { echo "deploy_local: $credentials was made for fewer than $clients clients; remove it" >&2; exit 2; }

rm -f "$work/port"
"$(bin fl_server)" --spec="$spec" --set="$set_fragment" --output_dir="$output_dir" \
    --listen=127.0.0.1:0 --port_file="$work/port" --tokens="$credentials/tokens.txt" \
    --tls_cert="$credentials/server.pem" --tls_key="$credentials/server.key" \
    --tls_client_ca="$credentials/ca.pem" "${server_args[@]}" \
    > >(tee "$work/logs/server.log" | sed -u 's/^/[server] /') 2>&1 &
server_pid=$!
trap 'kill -TERM $server_pid 2> /dev/null' INT TERM
for _ in $(seq 600); do
  [[ -s "$work/port" ]] && break
  kill -0 $server_pid 2> /dev/null || break
  sleep 0.1
done
if [[ ! -s "$work/port" ]]; then
  wait $server_pid
  code=$?
  echo "deploy_local: the server did not start (exit $code); see $work/logs/server.log" >&2
  exit $((code == 0 ? 1 : code))
fi
port=$(cat "$work/port")
client_pids=()
for ((k = 0; k < clients; k++)); do
  "$(bin fl_client)" --spec="$spec" --set="$set_fragment" --server="localhost:$port" \
      --client_id=$k --token_file="$credentials/token$k.txt" --tls_ca="$credentials/ca.pem" \
      --tls_cert="$credentials/client$k.pem" --tls_key="$credentials/client$k.key" \
      --state_dir="$work/state/client_$k" > "$work/logs/client_$k.log" 2>&1 &
  client_pids+=($!)
done
echo "deploy_local: server on 127.0.0.1:$port, $clients clients; their logs in $work/logs"
# `wait` returns early when a trapped signal arrives: wait again until the server is gone.
while true; do
  wait $server_pid
  code=$?
  kill -0 $server_pid 2> /dev/null || break
done
if [[ $code -eq 3 ]]; then
  # Stopped: the clients would keep reconnecting for the server's return. They
  # have recorded every verdict the server sent before its goodbye.
  kill -TERM "${client_pids[@]}" 2> /dev/null
  wait "${client_pids[@]}" 2> /dev/null
  echo "deploy_local: stopped; continue with the same command and --resume" >&2
  exit 3
fi
failed=0
for ((k = 0; k < clients; k++)); do
  wait "${client_pids[$k]}"
  client_code=$?
  if [[ $client_code -ne 0 ]]; then
    echo "deploy_local: client $k exited with $client_code; see $work/logs/client_$k.log" >&2
    failed=1
  fi
done
[[ $code -eq 0 && $failed -eq 1 ]] && exit 4
exit $code
