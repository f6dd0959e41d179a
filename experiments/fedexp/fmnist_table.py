#!/usr/bin/env python3
"""Table and plots for the FedExP Fashion-MNIST comparison (run_fmnist.sh).

Reads RESULTS/<method>_seed<S>/metrics.csv and writes RESULTS/table.md (rounds to
reach fixed test accuracies, per seed and mean, ratio to FedExP, in the style of
the paper's table) and, when matplotlib is importable, accuracy.png and eta_g.png.
"""
import csv
import os
import statistics
import sys

METHODS = [("fedexp", "FedExP"), ("fedavg", "FedAvg"), ("scaffold", "SCAFFOLD"),
           ("fedadagrad", "FedAdagrad (the code's form)"),
           ("fedadagrad_reddi", "FedAdagrad (Reddi et al.'s form)"),
           ("fedexp_eps1e-3", "FedExP (eps 0.001)")]
TARGETS = [0.75, 0.80, 0.83, 0.85, 0.86, 0.87]


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def rounds_to(rows, target):
    for row in rows:
        if float(row["test_accuracy"]) >= target:
            return int(row["round"])
    return None


def main(results):
    runs = {}
    for method, _ in METHODS:
        for name in sorted(os.listdir(results)):
            if name.startswith(method + "_seed") and os.path.isdir(os.path.join(results, name)):
                path = os.path.join(results, name, "metrics.csv")
                if os.path.exists(path):
                    runs.setdefault(method, []).append((name.split("seed")[1], load(path)))
    if not runs:
        sys.exit(f"no runs under {results}")
    num_rounds = max(int(rows[-1]["round"]) for r in runs.values() for _, rows in r)

    lines = ["# FedExP vs baselines on Fashion-MNIST (rounds to reach a test accuracy)", "",
             "Spec: experiments/fedexp/fmnist.textproto (MLP 784-200-200-10, 100 equal-size "
             "Dirichlet(0.3) clients, 20 per round, 20 local steps of batch 50).",
             f"Rounds run: {num_rounds}. '>{num_rounds}' = not reached. Mean over the seeds "
             "(only when every seed reached the target); a ratio is that mean over the FedExP "
             "variant's. FedExP uses the official code's EMNIST epsilon 0.1; FedExP (eps 0.001) "
             "its CIFAR/CINIC value. Made by: experiments/fedexp/run_fmnist.sh 300", ""]
    for target in TARGETS:
        lines += [f"## Target {target:.0%}", "",
                  "| method | " + " | ".join(f"seed {s}" for s, _ in runs[METHODS[0][0]]) +
                  " | mean | ratio to FedExP | ratio to FedExP (eps 0.001) |",
                  "| --- | " + " | ".join("---" for _ in runs[METHODS[0][0]]) + " | --- | --- | --- |"]
        means = {}
        for method, label in METHODS:
            if method not in runs:
                continue
            per_seed = [rounds_to(rows, target) for _, rows in runs[method]]
            reached = [r for r in per_seed if r is not None]
            means[method] = statistics.mean(reached) if len(reached) == len(per_seed) else None
        for method, label in METHODS:
            if method not in runs:
                continue
            per_seed = [rounds_to(rows, target) for _, rows in runs[method]]
            cells = [str(r) if r is not None else f">{num_rounds}" for r in per_seed]
            mean = means[method]

            def ratio(reference):
                return (f"{mean / means[reference]:.2f}x"
                        if mean is not None and means.get(reference) else "n/a")

            lines.append(f"| {label} | " + " | ".join(cells) +
                         f" | {mean:.1f} | {ratio('fedexp')} | {ratio('fedexp_eps1e-3')} |"
                         if mean is not None else
                         f"| {label} | " + " | ".join(cells) + " | not all seeds | n/a | n/a |")
        lines.append("")
    lines += ["## Final test accuracy (mean of the last 10 evaluated rounds)", "",
              "| method | " + " | ".join(f"seed {s}" for s, _ in runs[METHODS[0][0]]) + " | mean |",
              "| --- | " + " | ".join("---" for _ in runs[METHODS[0][0]]) + " | --- |"]
    for method, label in METHODS:
        if method not in runs:
            continue
        finals = [statistics.mean(float(r["test_accuracy"]) for r in rows[-10:])
                  for _, rows in runs[method]]
        lines.append(f"| {label} | " + " | ".join(f"{v:.4f}" for v in finals) +
                     f" | {statistics.mean(finals):.4f} ± {statistics.pstdev(finals):.4f} |")
    if "fedexp" in runs:
        for method, label in METHODS:
            if method.startswith("fedexp") and method in runs:
                etas = [float(r["eta_g"]) for _, rows in runs[method] for r in rows if r.get("eta_g")]
                lines += ["", f"{label}'s eta_g over all rounds and seeds: mean "
                          f"{statistics.mean(etas):.3f}, min {min(etas):.3f}, max {max(etas):.3f}, "
                          f"above 1 in {sum(e > 1 for e in etas) / len(etas):.0%} of rounds."]
    with open(os.path.join(results, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plots (apt-get install python3-matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, label in METHODS:
        if method not in runs:
            continue
        curves = [[float(r["test_accuracy"]) for r in rows] for _, rows in runs[method]]
        n = min(len(c) for c in curves)
        mean = [statistics.mean(c[i] for c in curves) for i in range(n)]
        ax.plot([int(r["round"]) for r in runs[method][0][1][:n]], mean, label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (mean over seeds)")
    ax.set_ylim(0.5, 0.9)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Fashion-MNIST, MLP, 100 Dirichlet(0.3) clients, 20 per round")
    fig.tight_layout()
    fig.savefig(os.path.join(results, "accuracy.png"), dpi=120)
    if "fedexp" in runs:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for method, label in METHODS:
            if not method.startswith("fedexp") or method not in runs:
                continue
            for seed, rows in runs[method]:
                ax.plot([int(r["round"]) for r in rows], [float(r["eta_g"]) for r in rows],
                        label=f"{label}, seed {seed}", linewidth=0.8)
        ax.set_xlabel("round")
        ax.set_ylabel("FedExP eta_g")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(results, "eta_g.png"), dpi=120)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/fedexp/results/fmnist")
