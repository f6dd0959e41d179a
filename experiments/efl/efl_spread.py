#!/usr/bin/env python3
"""Round-to-round spread of the test accuracy for the runs of an EFL sweep.

The sweep tool reports levels (best, last-k mean); the paper's Fig. 2 claim is that
the elastic term makes training steadier. This reads every <variant>_seed<S>/metrics.csv
under a sweep's results folder and prints, per variant (mean +- sd over seeds):

  sd20   the standard deviation of test_accuracy over the last 20 evaluated rounds
  jump20 the mean |acc(t) - acc(t-1)| over those rounds (round-to-round change)

and each variant's paired difference to a baseline variant (mean [min, max] over the
seeds both have), in percentage points. Lower is steadier.

With --target=A (an accuracy, 0.7812 for 78.12 %) it prints instead, per variant, the
first round whose test accuracy reaches A and the megabytes sent up and down by the
end of that round (bytes_up + bytes_down, cumulative in metrics.csv), mean +- sd over
the seeds that reach it, and how many do.

  python3 experiments/efl/efl_spread.py experiments/efl/results/lambda_fair [--baseline=fedavg] [--last=20]
  python3 experiments/efl/efl_spread.py experiments/efl/results/bytes --target=0.7812
"""
import csv
import os
import re
import statistics
import sys


def spread(path, last):
    with open(path) as f:
        acc = [float(r["test_accuracy"]) for r in csv.DictReader(f) if r["test_accuracy"]]
    tail = acc[-last:]
    jumps = [abs(b - a) for a, b in zip(acc[-last - 1:-1], acc[-last:])]
    return 100 * statistics.pstdev(tail), 100 * statistics.fmean(jumps)


def to_target(path, target):
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["test_accuracy"] and float(r["test_accuracy"]) >= target:
                return int(r["round"]), 1e-6 * (float(r["bytes_up"]) + float(r["bytes_down"]))
    return None


def main(argv):
    folder = argv[1]
    baseline = "fedavg"
    last = 20
    target = None
    for a in argv[2:]:
        if a.startswith("--target="):
            target = float(a.split("=", 1)[1])
        if a.startswith("--baseline="):
            baseline = a.split("=", 1)[1]
        elif a.startswith("--last="):
            last = int(a.split("=", 1)[1])
    runs = {}
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"(.+)_seed(\d+)", name)
        path = os.path.join(folder, name, "metrics.csv")
        if m and os.path.exists(os.path.join(folder, name, "summary.json")):
            runs.setdefault(m.group(1), {})[int(m.group(2))] = (
                to_target(path, target) if target is not None else spread(path, last))

    def ms(xs):
        return "%.2f +- %.2f" % (statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0)

    def paired(v, i):
        base = runs.get(baseline, {})
        d = [runs[v][s][i] - base[s][i] for s in runs[v] if s in base]
        return "%+.2f [%+.2f, %+.2f]" % (statistics.fmean(d), min(d), max(d)) if d else "-"

    if target is not None:
        print("| variant | seeds reaching %.2f %% | rounds to it | MB up + down to it |" % (100 * target))
        print("| --- | ---: | ---: | ---: |")
        for v in runs:
            hit = [x for x in runs[v].values() if x is not None]
            rounds = [x[0] for x in hit]
            mb = [x[1] for x in hit]
            print("| %s | %d of %d | %s | %s |" % (v, len(hit), len(runs[v]),
                  ms(rounds) if hit else "-", ms(mb) if hit else "-"))
        return
    print("| variant | seeds | sd of accuracy, last %d rounds | mean round-to-round change | paired diff. sd | paired diff. change |" % last)
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for v in runs:
        sd = [x[0] for x in runs[v].values()]
        jump = [x[1] for x in runs[v].values()]
        print("| %s | %d | %s | %s | %s | %s |" % (v, len(sd), ms(sd), ms(jump), paired(v, 0), paired(v, 1)))


if __name__ == "__main__":
    main(sys.argv)
