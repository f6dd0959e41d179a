#!/bin/bash
# Runs one experiment as N local processes of a distributed run (PyTorch's c10d,
# Gloo over TCP), the way torchrun would:
#   bazel run //tools:launch -- --processes=N [--master_port=P] -- RUN_EXPERIMENT_FLAGS...
# e.g. bazel run //tools:launch -- --processes=4 -- --spec=experiments/quickstart.textproto
# Each process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
# (127.0.0.1) and MASTER_PORT (a free port unless given), and the spec gets
# simulation { backend: C10D } merged into its --set. Output lines are prefixed
# with the rank. SIGINT/SIGTERM go to every process (each checkpoints and stops).
# When one process fails, the others are given their c10d timeout to notice and
# fail with the reason, then stopped. Exits with the first failing process's code.
# For several hosts, run tools/run_experiment on each with those variables set
# (docs/distributed.md); this script is for one.
set -uo pipefail

processes=""
port=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --processes=*) processes="${1#*=}"; shift ;;
    --master_port=*) port="${1#*=}"; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if ! [[ "$processes" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: launch --processes=N [--master_port=P] -- RUN_EXPERIMENT_FLAGS..." >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
runner="${FEDKIT_RUN_EXPERIMENT:-$here/run_experiment}"
[[ -x "$runner" ]] || runner="$PWD/tools/run_experiment"
if [[ -z "$port" ]]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi

# The spec's backend, merged into the user's --set (a scalar: theirs cannot conflict).
args=()
backend='simulation { backend: C10D }'
merged=0
for arg in "$@"; do
  if [[ "$arg" == --set=* ]]; then
    args+=("--set=${arg#--set=} $backend")
    merged=1
  else
    args+=("$arg")
  fi
done
[[ $merged -eq 1 ]] || args+=("--set=$backend")

pids=()
for ((rank = 0; rank < processes; rank++)); do
  RANK=$rank WORLD_SIZE=$processes LOCAL_RANK=$rank LOCAL_WORLD_SIZE=$processes \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$runner" "${args[@]}" > >(sed -u "s/^/[rank $rank] /") 2> >(sed -u "s/^/[rank $rank] /" >&2) &
  pids+=($!)
done

forward() { kill -"$1" "${pids[@]}" 2> /dev/null; }
trap 'forward INT' INT
trap 'forward TERM' TERM

# Waits for every process; after the first failure the rest get a grace period.
status=0
remaining=$processes
deadline=""
grace="${FEDKIT_LAUNCH_GRACE_SECONDS:-330}"
declare -A done_pids
while [[ $remaining -gt 0 ]]; do
  for i in "${!pids[@]}"; do
    pid=${pids[$i]}
    [[ -n "${done_pids[$pid]:-}" ]] && continue
    if ! kill -0 "$pid" 2> /dev/null; then
      wait "$pid"
      code=$?
      done_pids[$pid]=1
      remaining=$((remaining - 1))
      if [[ $code -ne 0 && $status -eq 0 ]]; then
        status=$code
        deadline=$((SECONDS + grace))
        echo "launch: rank $i exited with code $code; waiting up to ${grace}s for the others" >&2
      fi
    fi
  done
  if [[ -n "$deadline" && $SECONDS -ge $deadline && $remaining -gt 0 ]]; then
    echo "launch: stopping the $remaining process(es) still running" >&2
    forward KILL
    deadline=""
  fi
  [[ $remaining -gt 0 ]] && sleep 0.2
done
wait
exit $status
