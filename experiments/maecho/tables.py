#!/usr/bin/env python3
"""Tables and a plot for MA-Echo's one-shot reproductions (run.sh).

Reads RESULTS/<part>/<run>_seed<S>/{one_shot.csv,summary.json} and writes
RESULTS/tables.md: test accuracy (%) of every aggregate and of the client models
(their mean, min and max), mean +- sd over seeds, and MA-Echo's aggregation wall
time; Table 1's grid; Table 6's accuracy against the principal components kept,
with the bytes the clients sent; and, when matplotlib is importable,
RESULTS/iterations.png: MA-Echo's test accuracy after each iteration (part
"trace") beside the official log's.
"""
import csv
import json
import os
import re
import statistics
import sys

RUN = re.compile(r"^(?P<run>.+)_seed(?P<seed>\d+)$")
# What each of Table 6's 5 clients uploads besides its projections: the bias-free
# 784-400-200-100-10 MLP (414,600 float32) and its class counts (10 int64).
CLIENTS, MODEL_BYTES, COUNTS_BYTES = 5, 414600 * 4, 10 * 8
# The official code's log (full MNIST, 5 clients, beta 0.01): docs/maecho.md 4.1.
OFFICIAL = {"split average": 19.09, "maecho": 81.90}
# The same log's MA-Echo accuracy after 1, 5, 10, 20, 30 and 60 iterations.
OFFICIAL_TRACE = {1: 30.0, 5: 71.2, 10: 76.2, 20: 79.3, 30: 80.6, 60: 81.90}


def pm(values):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} +- {statistics.stdev(values):.2f}"


def load(folder):
    """run -> list of (seed, rows, summary) for every finished run under folder."""
    runs = {}
    if not os.path.isdir(folder):
        return runs
    for name in sorted(os.listdir(folder)):
        match = RUN.match(name)
        path = os.path.join(folder, name)
        if not match or not os.path.exists(os.path.join(path, "one_shot.csv")):
            continue
        with open(os.path.join(path, "one_shot.csv")) as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(path, "summary.json")) as f:
            summary = json.load(f)
        runs.setdefault(match["run"], []).append((int(match["seed"]), rows, summary))
    return runs


def accuracies(seeds, label):
    return [100 * float(r["test_accuracy"]) for _, rows, _ in seeds for r in rows
            if r["kind"] == "aggregate" and r["label"] == label]


def client_stat(seeds, stat):
    return [100 * stat([float(r["test_accuracy"]) for r in rows if r["kind"] == "client"])
            for _, rows, _ in seeds]


def labels(seeds):
    out = []
    for _, rows, _ in seeds:
        for r in rows:
            if r["kind"] == "aggregate" and r["label"] not in out:
                out.append(r["label"])
    return out


def seconds(seeds, label):
    return [float(r["aggregation_seconds"]) for _, rows, _ in seeds for r in rows
            if r["kind"] == "aggregate" and r["label"] == label]


def setting1(runs, lines):
    lines += ["## The code's setting (5 clients, Dirichlet 0.01, independent inits)", "",
              "Test accuracy (%), mean +- sd over seeds. `maecho` is the spec's aggregator "
              "(the code's form: the clients' mean as the output).", ""]
    names = [n for n in ("mnist", "fmnist") if n in runs]
    header = "| aggregate | " + " | ".join(
        f"{n} ({len(runs[n])} seeds)" for n in names) + " | official log (full MNIST) |"
    lines += [header, "|---" * (len(names) + 2) + "|"]
    for stat, title in ((statistics.mean, "client models, mean"), (min, "client models, worst"),
                        (max, "client models, best")):
        lines.append(f"| {title} | " + " | ".join(pm(client_stat(runs[n], stat)) for n in names)
                     + " | 10.1 to 29.6 |")
    for label in labels(runs[names[0]]):
        lines.append(f"| {label} | " + " | ".join(pm(accuracies(runs[n], label)) for n in names)
                     + f" | {OFFICIAL.get(label, '')} |")
    lines.append("| MA-Echo aggregation wall time (s) | " +
                 " | ".join(pm(seconds(runs[n], "maecho")) for n in names) + " | |")
    lines.append("")


def table1(runs, lines):
    grid = re.compile(r"^mnist_n(?P<n>\d+)_b(?P<b>[0-9.]+)$")
    cells = {}
    for run, seeds in runs.items():
        match = grid.match(run)
        if match:
            cells[(int(match["n"]), match["b"])] = seeds
    if not cells:
        return
    lines += ["## Table 1's shape on MNIST: clients x Dirichlet beta", "",
              "Test accuracy (%), mean +- sd over seeds; time: MA-Echo's aggregation alone "
              "(the paper: 1.045 s for 5 clients on its machine).", "",
              "| clients | beta | client models (mean) | split average | FedAvg (size-weighted) "
              "| MA-Echo | MA-Echo time (s) |", "|---|---|---|---|---|---|---|"]
    for (n, b), seeds in sorted(cells.items(), key=lambda c: (c[0][0], float(c[0][1]))):
        lines.append(f"| {n} | {b} | {pm(client_stat(seeds, statistics.mean))} | "
                     f"{pm(accuracies(seeds, 'split average'))} | "
                     f"{pm(accuracies(seeds, 'FedAvg (size-weighted)'))} | "
                     f"{pm(accuracies(seeds, 'maecho'))} | {pm(seconds(seeds, 'maecho'))} |")
    lines.append("")


def table6(runs, full, lines):
    pattern = re.compile(r"^mnist_k(?P<k>\d+)$")
    rows = []
    for run, seeds in runs.items():
        match = pattern.match(run)
        if match:
            rows.append((int(match["k"]), seeds))
    if not rows:
        return
    if full:
        rows.append((None, full))
    lines += ["## Table 6's shape on MNIST: principal components kept in each projection", "",
              "Each client sends the top k eigenpairs of I - P per layer instead of all of "
              "them (at most one per mini-batch it trained on). Bytes: the 5 clients' "
              "projections (everything uploaded less the models and class counts), and "
              "everything uploaded; mean over seeds.", "",
              "| components | MA-Echo accuracy (%) | projections (MB) | all uploaded (MB) |",
              "|---|---|---|---|"]
    for k, seeds in sorted(rows, key=lambda r: float("inf") if r[0] is None else r[0]):
        up = statistics.mean(s["bytes_up"] for _, _, s in seeds)
        projections = up - CLIENTS * (MODEL_BYTES + COUNTS_BYTES)
        lines.append(f"| {'all' if k is None else k} | {pm(accuracies(seeds, 'maecho'))} | "
                     f"{projections / 1e6:.3f} | {up / 1e6:.2f} |")
    lines.append("")


def qp(runs, uniform, lines):
    if not runs:
        return
    names = [n for n in ("mnist", "fmnist") if n in runs]
    lines += ["## The paper's QP weights against alpha = 1/N (the code's), setting 1", "",
              "Test accuracy (%) of MA-Echo, mean +- sd over seeds; the same client models "
              "in both columns (same seeds).", "",
              "| data | alpha = 1/N | QP alpha (bound 0.5) | QP aggregation time (s) |",
              "|---|---|---|---|"]
    for n in names:
        lines.append(f"| {n} | {pm(accuracies(uniform.get(n, []), 'maecho'))} | "
                     f"{pm(accuracies(runs[n], 'maecho'))} | {pm(seconds(runs[n], 'maecho'))} |")
    lines.append("")


def trace(runs, results, lines):
    if "mnist" not in runs:
        return
    curves = []
    for seed, _, _ in sorted(runs["mnist"]):
        path = os.path.join(results, "trace", f"mnist_seed{seed}", "diagnostics.csv")
        with open(path) as f:
            row = next(csv.DictReader(f))
        points = sorted((int(k.split("_")[-1]), 100 * float(v)) for k, v in row.items()
                        if k.startswith("accuracy_iter_"))
        curves.append((seed, points))
    at = [1, 5, 10, 20, 30, 60]
    lines += ["## MA-Echo's test accuracy after each iteration (MNIST subset, setting 1)", "",
              "| iterations | " + " | ".join(str(t) for t in at) + " |",
              "|---" * (len(at) + 1) + "|"]
    for seed, points in curves:
        by_t = dict(points)
        lines.append(f"| seed {seed} | " + " | ".join(f"{by_t[t]:.1f}" if t in by_t else "-"
                                                    for t in at) + " |")
    lines.append("| official log (full MNIST) | " +
                 " | ".join(f"{OFFICIAL_TRACE[t]:.1f}" for t in at) + " |")
    lines.append("")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for seed, points in curves:
        ax.plot([t for t, _ in points], [a for _, a in points], label=f"fedkit, MNIST subset, seed {seed}")
    ax.plot(list(OFFICIAL_TRACE), list(OFFICIAL_TRACE.values()), "ko--", label="official log, full MNIST")
    ax.set_xlabel("MA-Echo iteration")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("MA-Echo, 5 clients, Dirichlet 0.01, independent inits")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(results, "iterations.png"), dpi=120)


def main(results):
    lines = ["# MA-Echo one-shot reproductions", "",
             "Made by `experiments/maecho/run.sh` (specs: experiments/maecho/mnist_mlp.textproto, "
             "fmnist_mlp.textproto). MNIST here is the 10,000-digit subset tools/setup.sh "
             "installs (8,000 train / 2,000 test), not the full set of the official log.", ""]
    first = load(os.path.join(results, "setting1"))
    if first:
        setting1(first, lines)
    table1(load(os.path.join(results, "table1")), lines)
    table6(load(os.path.join(results, "table6")), first.get("mnist"), lines)
    qp(load(os.path.join(results, "qp")), first, lines)
    trace(load(os.path.join(results, "trace")), results, lines)
    with open(os.path.join(results, "tables.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/maecho/results")
