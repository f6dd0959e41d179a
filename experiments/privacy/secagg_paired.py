#!/usr/bin/env python3
"""The epsilon sweep with and without secure aggregation, run by run.

Usage: secagg_paired.py PLAIN_RESULTS SECAGG_RESULTS [METRIC] > with_without.md

Reads both sweeps' runs.csv (tools/sweep) and prints, per variant, the metric's
mean ± sd over seeds without and with secure aggregation, and the paired
difference (with - without, seed by seed): its mean and range, in points.
METRIC defaults to last2_mean_test_accuracy. Only seeds both sweeps finished
are paired.
"""
import csv
import statistics
import sys


def runs(folder, metric):
    table = {}
    with open(f"{folder}/runs.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row.get(metric, "") != "":
                table.setdefault(row["variant"], {})[int(row["seed"])] = 100 * float(row[metric])
    return table


def mean_sd(values):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f} (n=1)"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def main(plain_dir, secagg_dir, metric="last2_mean_test_accuracy"):
    plain, secagg = runs(plain_dir, metric), runs(secagg_dir, metric)
    print(f"Metric: `{metric}` (%), mean ± sd over seeds; paired difference: with - without,")
    print("seed by seed, in points: its mean [min, max].\n")
    print("| variant | without | with secure aggregation | paired difference | seeds |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for variant in plain:
        without, with_ = plain[variant], secagg.get(variant, {})
        seeds = sorted(set(without) & set(with_))
        differences = [with_[s] - without[s] for s in seeds]
        paired = (f"{statistics.mean(differences):+.2f} [{min(differences):+.2f}, {max(differences):+.2f}]"
                  if differences else "-")
        print(f"| {variant} | {mean_sd(list(without.values()))} | {mean_sd(list(with_.values()))} "
              f"| {paired} | {len(seeds)} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
