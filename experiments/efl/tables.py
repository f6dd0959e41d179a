#!/usr/bin/env python3
"""Tables and plots for EFL's reproductions (run.sh).

Reads RESULTS/<part>/<run>_seed<S>/metrics.csv and writes RESULTS/tables.md: per
run, the best test accuracy over rounds (the paper reports the best, of a
different mean: see docs/efl.md) and the mean of the last 10 rounds, mean +- sd
over seeds; for the stragglers, the clients left out or scaled; for compression,
the megabytes sent both ways. When matplotlib is importable: lambda.png (test
accuracy per round) and compression.png (accuracy against megabytes sent).
"""
import csv
import os
import re
import statistics
import sys

RUN = re.compile(r"^(?P<run>.+)_seed(?P<seed>\d+)$")
# Table 2 of the paper, MNIST column (best mean test accuracy, %).
PAPER_MNIST = {"fedavg": 98.30, "efl": 99.10}


def pm(values):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} +- {statistics.stdev(values):.2f}"


def load(folder):
    runs = {}
    if not os.path.isdir(folder):
        return runs
    for name in sorted(os.listdir(folder)):
        match = RUN.match(name)
        path = os.path.join(folder, name, "metrics.csv")
        if not match or not os.path.exists(os.path.join(folder, name, "summary.json")):
            continue
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if rows:
            runs.setdefault(match["run"], []).append((int(match["seed"]), rows))
    return runs


def best(rows):
    return 100 * max(float(r["test_accuracy"]) for r in rows)


def last10(rows):
    return 100 * statistics.mean(float(r["test_accuracy"]) for r in rows[-10:])


def megabytes(rows):
    return (int(rows[-1]["bytes_up"]) + int(rows[-1]["bytes_down"])) / 1e6


def section(lines, title, runs, names, extra=None):
    lines += [f"## {title}", "",
              "| run | seeds | best test accuracy (%) | mean of the last 10 rounds (%) |" +
              (f" {extra[0]} |" if extra else ""),
              "|---|---|---|---|" + ("---|" if extra else "")]
    for name in names:
        seeds = runs.get(name)
        if not seeds:
            continue
        cells = [name, str(len(seeds)), pm([best(r) for _, r in seeds]),
                 pm([last10(r) for _, r in seeds])]
        if extra:
            cells.append(extra[1](seeds))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")


def main(results):
    lines = ["# EFL reproductions at a CPU size", "",
             "Made by `experiments/efl/run.sh` on experiments/efl/fmnist_mlp_shards.textproto "
             "(100 clients with 2 classes each, 10 per round, MLP 784-200-200-10). Accuracy "
             "is the global model's on the pooled test set; the paper's Table 2 metric is the "
             f"mean of the participants' own test accuracies (its MNIST column: FedAvg "
             f"{PAPER_MNIST['fedavg']}, EFL {PAPER_MNIST['efl']}).", ""]
    lam = load(os.path.join(results, "lambda"))
    for data in ("fmnist", "mnist"):
        names = [f"{data}_fedavg", f"{data}_fedprox"] + [f"{data}_efl_l{l}" for l in
                                                          ("0", "0.01", "0.1", "1")]
        section(lines, f"lambda ({data})", lam, names)
    strag = load(os.path.join(results, "stragglers"))

    def incomplete(seeds):
        return pm([float(sum(int(r["incomplete"]) for r in rows)) for _, rows in seeds])

    names = [f"{m}_f{f}" for f in ("0", "0.3", "0.6")
             for m in ("fedavg_drop", "fedavg_keep", "efl_scale")]
    section(lines, "stragglers (Fashion-MNIST)", strag, names,
            ("incomplete updates over the run", incomplete))
    comp = load(os.path.join(results, "compression"))
    names = ["efl_q1"] + [f"efl_q{q}_ef{ef}" for q in ("0.1", "0.01") for ef in ("true", "false")]
    section(lines, "two-way sparse ternary compression (Fashion-MNIST)", comp, names,
            ("MB sent (up + down)", lambda seeds: pm([megabytes(r) for _, r in seeds])))
    with open(os.path.join(results, "tables.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    if lam:
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, seeds in sorted(lam.items()):
            if not name.startswith("fmnist_"):
                continue
            seed, rows = sorted(seeds)[0]
            ax.plot([int(r["round"]) for r in rows], [100 * float(r["test_accuracy"]) for r in rows],
                    label=f"{name[len('fmnist_'):]} (seed {seed})", linewidth=1)
        ax.set_xlabel("round")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title("Fashion-MNIST, 2 classes per client")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(results, "lambda.png"), dpi=120)
    if comp:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, seeds in sorted(comp.items()):
            for i, (seed, rows) in enumerate(sorted(seeds)):
                mb = [(int(r["bytes_up"]) + int(r["bytes_down"])) / 1e6 for r in rows]
                ax.plot(mb, [100 * float(r["test_accuracy"]) for r in rows],
                        label=name if i == 0 else None, linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel("megabytes sent, up and down (log)")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(results, "compression.png"), dpi=120)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/efl/results")
