#!/bin/bash
# What deployment over gRPC costs against the in-process simulation of the same
# spec: the quickstart spec (Fashion-MNIST, MLP 784-200-200-10, FedAvg, 2 local
# epochs of batch 50) with 10 clients, all 10 in every round, run in-process and
# as tools/deploy_local (fl_server and 10 fl_client processes over mutual TLS on
# 127.0.0.1).
#   bazel run //tools:deploy_bench -- [--out DIR] [--repeats N] [--rounds R]
# DIR (default experiments/bench_results/deploy_local under the folder bazel was
# run from) gets report.md and every run's output. Round time excludes round 1,
# whose tasks wait for the client processes to start. Nothing else should run on
# the machine meanwhile: these are timings.
set -euo pipefail

out="${BUILD_WORKING_DIRECTORY:-$PWD}/experiments/bench_results/deploy_local"
repeats=3
rounds=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; [[ "$out" = /* ]] || out="${BUILD_WORKING_DIRECTORY:-$PWD}/$out"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "usage: deploy_bench [--out DIR] [--repeats N] [--rounds R]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
runner="$PWD/tools/run_experiment"
launcher="$PWD/tools/deploy_local"
spec="$PWD/experiments/quickstart.textproto"
set_spec="device: CPU partition { num_clients: 10 } server { rounds: $rounds clients_per_round: 10 } output { checkpoint_every: 0 }"
lo_bytes() { awk '/^ *lo:/ { print $10 }' /proc/net/dev; }

rows="$out/runs.tsv"
printf "mode\trepeat\tcommand_seconds\tround_seconds\tmetrics_bytes\tprotocol_bytes\tloopback_bytes\n" > "$rows"
for mode in in_process deployed; do
  for ((r = 1; r <= repeats; r++)); do
    dir="$out/$mode.$r"
    rm -rf "$dir"
    mkdir -p "$dir"
    before=$(lo_bytes)
    start=$(date +%s.%N)
    if [[ $mode == in_process ]]; then
      "$runner" --spec="$spec" --set="$set_spec" --output_dir="$dir" > "$dir.log" 2>&1
    else
      "$launcher" --spec="$spec" --clients=10 --set="$set_spec" --output_dir="$dir" > "$dir.log" 2>&1
    fi
    end=$(date +%s.%N)
    after=$(lo_bytes)
    protocol=$(sed -n 's/.*fl_server: sent \([0-9]*\) bytes in [0-9]* messages, received \([0-9]*\) bytes.*/\1 \2/p' "$dir.log" |
               awk '{ print $1 + $2 }')
    python3 - "$dir" "$mode" "$r" "$start" "$end" "${protocol:-0}" $((after - before)) >> "$rows" <<'PY'
import csv, sys
d, mode, repeat, start, end, protocol, loopback = sys.argv[1:]
rows = list(csv.DictReader(open(d + "/metrics.csv")))
seconds = [float(r["seconds"]) for r in rows]
last = rows[-1]
print("\t".join(map(str, [mode, repeat, "%.2f" % (float(end) - float(start)),
                          "%.3f" % ((seconds[-1] - seconds[0]) / (len(seconds) - 1)),
                          int(last["bytes_up"]) + int(last["bytes_down"]), protocol, loopback])))
PY
    echo "$mode repeat $r: $(tail -1 "$rows" | cut -f3)s"
  done
done
cmp <(cut -d, -f1-10,12- "$out/in_process.1/metrics.csv") <(cut -d, -f1-10,12- "$out/deployed.1/metrics.csv") &&
  identical="yes" || identical="NO"

python3 - "$rows" "$out/report.md" "$repeats" "$rounds" "$identical" <<'PY'
import collections, statistics, sys
rows_path, report_path, repeats, rounds, identical = sys.argv[1:]
rounds = int(rounds)
groups = collections.OrderedDict()
for line in list(open(rows_path))[1:]:
    mode, _, command, round_s, metrics, protocol, loopback = line.split("\t")
    groups.setdefault(mode, []).append((float(command), float(round_s), int(metrics), int(protocol), int(loopback)))
def med(mode, i):
    return statistics.median(r[i] for r in groups[mode])
out = ["# Deployment over gRPC against the in-process simulation", "",
       "`bazel run //tools:deploy_bench -- --repeats %s --rounds %d`: the quickstart spec with" % (repeats, rounds),
       "10 clients, all 10 every round (FedAvg, MLP 784-200-200-10, 2 epochs of batch 50 on",
       "6,000 Fashion-MNIST images each), on CPU. Deployed: tools/deploy_local, fl_server and",
       "10 fl_client processes over mutual TLS on 127.0.0.1. Medians over the repeats.",
       "Metrics.csv equal but for wall time (first repeat): %s." % identical, "",
       "| | in-process | deployed | deployed / in-process |", "| --- | --- | --- | --- |"]
for label, i, fmt in [("whole command (s)", 0, "%.2f"), ("round time, rounds 2-%d (s)" % rounds, 1, "%.3f")]:
    a, b = med("in_process", i), med("deployed", i)
    out.append("| %s | %s | %s | %.2fx |" % (label, fmt % a, fmt % b, b / a))
a, b = med("in_process", 1), med("deployed", 1)
out.append("| rounds per second | %.2f | %.2f | %.2fx |" % (1 / a, 1 / b, a / b))
metrics = med("deployed", 2) / rounds / 1e6
protocol = med("deployed", 3) / rounds / 1e6
loopback = med("deployed", 4) / rounds / 1e6
out += ["", "Bytes per round (MB):", "",
        "| model bytes counted by metrics.csv (up + down) | protocol messages (fl_server) | through `lo` (TLS, HTTP/2, TCP) |",
        "| --- | --- | --- |",
        "| %.2f | %.2f (%.3fx) | %.2f (%.3fx) |" % (metrics, protocol, protocol / metrics, loopback, loopback / metrics),
        "", "`lo` counts the whole machine's loopback traffic while the run lasted, so anything else on it counts too."]
open(report_path, "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
