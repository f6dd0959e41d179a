#!/usr/bin/env python3
"""Table and plots for FedLAW's Fashion-MNIST comparison (run_fmnist.sh).

Usage: fmnist_table.py RESULTS [code|paper]. Reads
RESULTS/<method>_a<alpha>_seed<S>/metrics.csv and writes RESULTS/table.md
(mean test accuracy over the last 10 rounds, as the paper and its code report it,
per seed and mean +- std over seeds, beside the paper's Table 3 MLP numbers) and,
when matplotlib is importable, accuracy.png (test accuracy per round) and gamma.png
(FedLAW's learned gamma per round).
"""
import csv
import os
import re
import statistics
import sys

METHODS = [("fedavg", "FedAvg"), ("fedlaw", "FedLAW"), ("fedlaw_swa", "FedLAW (SWA)"),
           ("server_ft", "Server-FT"), ("feddf", "FedDF")]
# Table 3 of the paper, Fashion-MNIST MLP, E = 3, 20 clients (top-1 %).
PAPER = {("fedavg", "100"): 89.29, ("fedavg", "0.1"): 85.11,
         ("fedlaw", "100"): 88.51, ("fedlaw", "0.1"): 86.30,
         ("fedlaw_swa", "100"): 88.27, ("fedlaw_swa", "0.1"): 86.89,
         ("server_ft", "100"): 89.09, ("server_ft", "0.1"): 85.71,
         ("feddf", "100"): 86.16, ("feddf", "0.1"): 78.48}
RUN = re.compile(r"^(?P<method>.+)_a(?P<alpha>[0-9.]+)_seed(?P<seed>\d+)$")
LAST = 10
# What the server side of each setting of run_fmnist.sh is.
SETTINGS = {
    "code": "Server side as the official code: proxy = 200 class-balanced test images "
            "(evaluation on the other 9,800); Es = 20 for FedLAW (Adam lr 0.005), Server-FT "
            "and FedDF (SGD lr 0.08, momentum 0.9).",
    "paper": "Server side as the paper's Appendix B/D: proxy = 100 class-balanced test images "
             "(evaluation on the other 9,900); Es = 100 for FedLAW and FedDF, 2 for Server-FT; "
             "Adam (betas 0.5, 0.999) for every server-side optimiser.",
}


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def momentum_kept(results):
    """Whether the runs kept each client's optimiser state (client.keep_optimizer_state)."""
    for name in sorted(os.listdir(results)):
        spec = os.path.join(results, name, "spec.textproto")
        if RUN.match(name) and os.path.exists(spec):
            with open(spec) as f:
                return "keep_optimizer_state: true" in f.read()
    return False


def last_mean(rows):
    tail = rows[-LAST:]
    return 100 * statistics.mean(float(r["test_accuracy"]) for r in tail)


def main(results, settings):
    runs = {}  # (method, alpha) -> [(seed, rows)]
    for name in sorted(os.listdir(results)):
        match = RUN.match(name)
        path = os.path.join(results, name, "metrics.csv")
        if match and os.path.exists(path):
            rows = load(path)
            if rows:
                runs.setdefault((match["method"], match["alpha"]), []).append(
                    (int(match["seed"]), rows))
    if not runs:
        sys.exit(f"no runs under {results}")
    alphas = sorted({a for _, a in runs}, key=lambda a: -float(a))
    num_rounds = max(int(rows[-1]["round"]) for r in runs.values() for _, rows in r)

    server = SETTINGS[settings]
    kept = momentum_kept(results)
    optimizer = ("each client's momentum kept across its rounds" if kept
                 else "a fresh optimiser every round")
    lines = [f"# FedLAW vs baselines on Fashion-MNIST (paper Table 3, MLP rows), {settings} settings",
             "",
             "Spec: experiments/fedlaw/fmnist.textproto (MLP 784-200-200-10, 20 clients, "
             "Dirichlet(alpha) per class, full participation, E = 3, SGD lr 0.08 * 0.99^t, "
             f"momentum 0.9, wd 5e-4, batch 128, {optimizer}, 30% client "
             f"hold-out). {server}",
             f"Rounds run: {num_rounds}. Metric: mean test accuracy (%) over the last {LAST} "
             "rounds, per seed, then mean +- std over seeds. Made by: "
             f"{'SETTINGS=paper ' if settings == 'paper' else ''}experiments/fedlaw/run_fmnist.sh",
             ""]
    header = "| method | " + " | ".join(f"alpha {a} (ours) | alpha {a} (paper)" for a in alphas)
    lines += [header + " |", "|---" * (1 + 2 * len(alphas)) + "|"]
    for method, label in METHODS:
        if not any((method, a) in runs for a in alphas):
            continue
        cells = []
        for a in alphas:
            seeds = sorted(runs.get((method, a), []))
            values = [last_mean(rows) for _, rows in seeds]
            if not values:
                cells.append("")
            elif len(values) == 1:
                cells.append(f"{values[0]:.2f} (seed {seeds[0][0]})")
            else:
                cells.append(f"{statistics.mean(values):.2f} +- {statistics.stdev(values):.2f} "
                             f"({', '.join(f'{v:.2f}' for v in values)})")
            paper = PAPER.get((method, a))
            cells.append(f"{paper:.2f}" if paper is not None else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    gammas = []
    for (method, a), seeds in sorted(runs.items()):
        for seed, rows in seeds:
            if rows and "gamma" in rows[0]:
                g = [float(r["gamma"]) for r in rows]
                gammas.append((method, a, seed, g))
    if gammas:
        lines += ["", "## Learned gamma (FedLAW)", "",
                  "| run | first round | mean | min | max | last |", "|---|---|---|---|---|---|"]
        for method, a, seed, g in gammas:
            lines.append(f"| {method} alpha {a} seed {seed} | {g[0]:.4f} | "
                         f"{statistics.mean(g):.4f} | {min(g):.4f} | {max(g):.4f} | {g[-1]:.4f} |")
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
    fig, axes = plt.subplots(1, len(alphas), figsize=(6 * len(alphas), 4), squeeze=False)
    for ax, a in zip(axes[0], alphas):
        for method, label in METHODS:
            for i, (seed, rows) in enumerate(sorted(runs.get((method, a), []))):
                ax.plot([int(r["round"]) for r in rows],
                        [100 * float(r["test_accuracy"]) for r in rows],
                        label=label if i == 0 else None, color=f"C{[m for m, _ in METHODS].index(method)}",
                        alpha=0.8, linewidth=1)
        ax.set_title(f"Fashion-MNIST MLP, Dirichlet alpha = {a}")
        ax.set_xlabel("round")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(results, "accuracy.png"), dpi=120)
    if gammas:
        fig, ax = plt.subplots(figsize=(7, 4))
        for method, a, seed, g in gammas:
            ax.plot(range(1, len(g) + 1), g, label=f"{method} alpha {a} seed {seed}", linewidth=1)
        ax.axhline(1.0, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xlabel("round")
        ax.set_ylabel("gamma (global weight shrinking)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(results, "gamma.png"), dpi=120)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/fedlaw/results/fmnist",
         sys.argv[2] if len(sys.argv) > 2 else "code")
