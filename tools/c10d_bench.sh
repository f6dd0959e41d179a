#!/bin/bash
# What a distributed run (simulation.backend C10D) costs and gains on this host:
# round time, bytes handed to collectives and bytes through the loopback
# interface per round, and each rank's peak memory, for 1, 2 and 4 local
# processes with either merge, against the in-process run of the same spec.
#   bazel run -c opt //tools:c10d_bench -- [--out DIR] [--repeats N]
# DIR (default experiments/bench_results/c10d under the folder bazel was run
# from) gets report.md and every run's output. Two specs: LeNet-5 (29k
# parameters; training dominates) and an MLP 784-1024-1024-10 (1.9M parameters;
# 7.6 MB a model, so traffic shows), both on 16k Fashion-MNIST images, 16 clients,
# 8 a round, 25 local steps of batch 32, 8 rounds, evaluated once at the end.
# Nothing else should run on the machine meanwhile: these are timings.
set -euo pipefail

out="${BUILD_WORKING_DIRECTORY:-$PWD}/experiments/bench_results/c10d"
repeats=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; [[ "$out" = /* ]] || out="${BUILD_WORKING_DIRECTORY:-$PWD}/$out"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "usage: c10d_bench [--out DIR] [--repeats N]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
runner="$PWD/tools/run_experiment"
launch="$PWD/tools/launch"
export FEDKIT_RUN_EXPERIMENT="$runner"

spec="$out/spec.textproto"
cat > "$spec" <<'SPEC'
name: "c10d_bench"
seed: 1
device: CPU
dataset {
  name: "fashion_mnist"
  options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 16000 test_limit: 1000 } }
}
partition { name: "iid" num_clients: 16 }
model { name: "lenet5" }
client { steps: 25 batch_size: 32 optimizer { kind: SGD lr: 0.05 momentum: 0.9 } }
server { rounds: 8 clients_per_round: 8 eval_every: 8 }
aggregator { name: "fedavg" }
output { checkpoint_every: 0 }
SPEC
declare -A models=(
  [lenet5]='model { name: "lenet5" }'
  [mlp1024]='model { name: "mlp" options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [1024, 1024] } } }'
)

lo_bytes() { awk '/^ *lo:/ { print $10 }' /proc/net/dev; }

rows="$out/runs.tsv"
printf "model\tprocesses\tmerge\trepeat\twall_seconds\tpayload_bytes\tloopback_bytes\tpeak_rss_mb\n" > "$rows"
for model in lenet5 mlp1024; do
  for config in in_process c10d.1.AUTO c10d.2.AUTO c10d.4.AUTO c10d.1.GATHER c10d.2.GATHER c10d.4.GATHER; do
    for ((r = 1; r <= repeats; r++)); do
      dir="$out/$model.$config.$r"
      rm -rf "$dir"
      before=$(lo_bytes)
      if [[ $config == in_process ]]; then
        processes=0 merge=-
        "$runner" --spec="$spec" --output_dir="$dir" --set="${models[$model]}" > "$dir.log" 2>&1
      else
        IFS=. read -r _ processes merge <<< "$config"
        "$launch" --processes="$processes" -- --spec="$spec" --output_dir="$dir" \
          --set="${models[$model]} simulation { c10d { merge: $merge } }" > "$dir.log" 2>&1
      fi
      after=$(lo_bytes)
      python3 - "$dir/summary.json" "$model" "$processes" "$merge" "$r" $((after - before)) >> "$rows" <<'PY'
import json, sys
path, model, processes, merge, repeat, loopback = sys.argv[1:]
s = json.load(open(path))
c = s.get("c10d", {})
payload = sum(c.get("payload_bytes_by_rank", [0]))
rss = max(c.get("peak_rss_mb_by_rank", [s["peak_rss_mb"]]))
print("\t".join(map(str, [model, processes, merge, repeat, s["wall_seconds"], int(payload), loopback, rss])))
PY
      echo "$model $config repeat $r: $(tail -1 "$rows" | cut -f5)s"
    done
  done
done

python3 - "$rows" "$out/report.md" "$repeats" <<'PY'
import collections, statistics, sys
rows_path, report_path, repeats = sys.argv[1], sys.argv[2], sys.argv[3]
lines = [l.rstrip("\n").split("\t") for l in open(rows_path)][1:]
groups = collections.OrderedDict()
for model, processes, merge, repeat, wall, payload, loopback, rss in lines:
    groups.setdefault((model, processes, merge), []).append((float(wall), int(payload), int(loopback), float(rss)))
rounds = 8
out = ["# Distributed runs on one host: c10d (Gloo over TCP loopback)", "",
       "`bazel run -c opt //tools:c10d_bench -- --repeats %s`; 16 Fashion-MNIST clients, 8 a round," % repeats,
       "25 local steps of batch 32, FedAvg, 8 rounds. Round time: the server loop's wall time / 8",
       "(median over the repeats, min-max in brackets); in-process uses its default thread budget",
       "(2 workers x 1 thread here). Payload: the bytes all ranks handed to collectives per round",
       "(tensors per all-reduce, broadcasts counted once, messages to rank 0). Loopback: bytes",
       "through `lo` per round (/proc/net/dev; the whole machine's, so anything else on it counts too).", ""]
for model in dict.fromkeys(k[0] for k in groups):
    out += ["## " + model, "",
            "| processes | merge | round time (s) | vs in-process | payload MB/round | loopback MB/round | peak RSS MB (max rank) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    base = statistics.median(w for w, *_ in groups[(model, "0", "-")])
    for (m, processes, merge), runs in groups.items():
        if m != model:
            continue
        walls = sorted(w / rounds for w, *_ in runs)
        med = statistics.median(walls)
        payload = statistics.median(p for _, p, _, _ in runs) / rounds / 1e6
        loop = statistics.median(l for _, _, l, _ in runs) / rounds / 1e6
        rss = max(r for *_, r in runs)
        label = "in-process" if processes == "0" else processes
        out.append("| %s | %s | %.3f (%.3f-%.3f) | %.2fx | %.2f | %.2f | %.0f |" % (
            label, merge, med, walls[0], walls[-1], med / (base / rounds), payload, loop, rss))
    out.append("")
open(report_path, "w").write("\n".join(out))
print("\n".join(out))
PY
