#!/usr/bin/env python3
"""Plots linear_regression's curves.csv: distance to the optimum per round (log
scale) for FedAvg and FedExP, and FedExP's eta_g. Needs matplotlib (Debian's
python3-matplotlib, run with /usr/bin/python3).

  /usr/bin/python3 experiments/fedexp/linear_regression_plot.py experiments/fedexp/results/linear_regression
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results):
    with open(os.path.join(results, "curves.csv")) as f:
        rows = list(csv.DictReader(f))
    rounds = [int(r["round"]) for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    for column, label in [("fedavg", "FedAvg"), ("fedexp", "FedExP (iterate)"),
                          ("fedexp_last_two_average", "FedExP (last-two average)")]:
        top.semilogy(rounds, [float(r[column]) for r in rows], label=label)
    top.set_ylabel("||w - w*||^2 / ||w*||^2")
    top.grid(alpha=0.3)
    top.legend()
    top.set_title("Over-parameterised linear regression (d = 1000, 20 clients x 30 samples)")
    bottom.plot(rounds, [float(r["fedexp_eta_g"]) for r in rows], color="tab:orange")
    bottom.set_ylabel("FedExP eta_g")
    bottom.set_xlabel("round")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(results, "curves.png"), dpi=120)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/fedexp/results/linear_regression")
