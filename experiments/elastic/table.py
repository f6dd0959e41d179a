#!/usr/bin/env python3
"""Table and curves for an Elastic Aggregation comparison (run.sh).

Reads RESULTS/<method>_seed<S>/metrics.csv (and diagnostics.csv for zeta) and
writes RESULTS/table.md: final and best test accuracy and the mean of the last 10
evaluated rounds per seed, their mean and standard deviation, and each method's
paired difference to FedAvg (mean and range over the seeds); with matplotlib,
accuracy.png (mean over seeds, min-max band) and zeta.png (mean zeta per round).
"""
import csv
import os
import statistics
import sys

METHODS = [("fedavg", "FedAvg (naive)"),
           ("fedavg_lr1.25", "FedAvg, server step 1.25"),
           ("fedavg_lr1.5", "FedAvg, server step 1.5"),
           ("elastic", "Elastic (paper mode)"),
           ("elastic_1batch", "Elastic (paper mode, B_k = 1 batch)"),
           ("elastic_flbench", "Elastic (FL-bench-like mode)")]


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def evaluated(rows):
    return [(int(r["round"]), float(r["test_accuracy"])) for r in rows
            if r.get("test_accuracy") not in (None, "", "nan")]


def summary(rows):
    acc = evaluated(rows)
    return {"final": acc[-1][1], "best": max(a for _, a in acc),
            "last10": statistics.mean(a for _, a in acc[-10:])}


def fmt(values):
    if len(values) > 1:
        return f"{100 * statistics.mean(values):.2f} ± {100 * statistics.stdev(values):.2f}"
    return f"{100 * values[0]:.2f}"


def main(results):
    runs = {}
    for method, _ in METHODS:
        for name in sorted(os.listdir(results)):
            if name.startswith(method + "_seed") and name[len(method) + 5:].isdigit():
                path = os.path.join(results, name, "metrics.csv")
                if os.path.exists(path):
                    runs.setdefault(method, {})[int(name[len(method) + 5:])] = load(path)
    if "fedavg" not in runs:
        sys.exit(f"no FedAvg runs under {results}")
    setting = os.path.basename(os.path.normpath(results))
    seeds = sorted(runs["fedavg"])
    rounds = max(int(rows[-1]["round"]) for r in runs.values() for rows in r.values())
    lines = [f"# Elastic Aggregation vs FedAvg: {setting}", "",
             f"Spec: experiments/elastic/{setting}.textproto, {rounds} rounds, seeds "
             f"{', '.join(map(str, seeds))}. Made by: experiments/elastic/run.sh {setting}", "",
             "Test accuracy (%), mean ± standard deviation over the seeds. 'last 10' = mean of "
             "the last 10 evaluated rounds. 'vs FedAvg' = per-seed difference to FedAvg with the "
             "same seed (same partition and sampling), mean [min, max] in points.", "",
             "| method | final | best | last 10 | final vs FedAvg | last 10 vs FedAvg | "
             + " | ".join(f"final seed {s}" for s in seeds) + " |",
             "| --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in seeds) + " |"]
    base = {s: summary(runs["fedavg"][s]) for s in seeds}
    for method, label in METHODS:
        if method not in runs:
            continue
        per_seed = {s: summary(rows) for s, rows in sorted(runs[method].items())}
        cells = [fmt([v[k] for v in per_seed.values()]) for k in ("final", "best", "last10")]
        for key in ("final", "last10"):
            diffs = [100 * (per_seed[s][key] - base[s][key]) for s in per_seed if s in base]
            cells.append("—" if method == "fedavg" else
                         f"{statistics.mean(diffs):+.2f} [{min(diffs):+.2f}, {max(diffs):+.2f}]")
        cells += [f"{100 * per_seed[s]['final']:.2f}" if s in per_seed else "n/a" for s in seeds]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    with open(os.path.join(results, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plots")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, label in METHODS:
        if method not in runs:
            continue
        curves = [dict(evaluated(rows)) for rows in runs[method].values()]
        xs = sorted(set.intersection(*(set(c) for c in curves)))
        mean = [statistics.mean(c[x] for c in curves) for x in xs]
        ax.plot(xs, [100 * m for m in mean], label=f"{label} ({len(curves)} seeds)")
        ax.fill_between(xs, [100 * min(c[x] for c in curves) for x in xs],
                        [100 * max(c[x] for c in curves) for x in xs], alpha=0.2)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"Elastic vs FedAvg: {setting} (band: min-max over seeds)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(results, "accuracy.png"), dpi=120)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for method, label in METHODS:
        if not method.startswith("elastic"):
            continue
        for seed, _ in sorted(runs.get(method, {}).items()):
            path = os.path.join(results, f"{method}_seed{seed}", "diagnostics.csv")
            if not os.path.exists(path):
                continue
            rows = [r for r in load(path) if r.get("elastic/zeta_mean")]
            ax.plot([int(r["round"]) for r in rows], [float(r["elastic/zeta_mean"]) for r in rows],
                    label=f"{label}, seed {seed}", lw=0.8)
    ax.set_xlabel("round")
    ax.set_ylabel("mean zeta")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(results, "zeta.png"), dpi=120)


if __name__ == "__main__":
    main(sys.argv[1])
