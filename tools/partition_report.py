#!/usr/bin/env python3
"""Draws partition.png from a partition_counts folder (counts.csv, summary.txt).

Left: a clients x classes heatmap of example counts; right: each client's size.
Usage: partition_report.py DIR
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402


def main(out):
    with open(os.path.join(out, "counts.csv")) as f:
        rows = list(csv.reader(f))
    classes = rows[0][1:]
    counts = [[int(v) for v in row[1:]] for row in rows[1:]]
    sizes = [sum(row) for row in counts]
    title = ""
    summary = os.path.join(out, "summary.txt")
    if os.path.exists(summary):
        with open(summary) as f:
            title = f.readline().strip()

    n_clients = len(counts)
    height = min(2.0 + 0.22 * n_clients, 40.0)
    fig, (heat_ax, bar_ax) = plt.subplots(
        1, 2, figsize=(max(6.0, 0.45 * len(classes) + 4.0), height), sharey=True,
        gridspec_kw={"width_ratios": [max(len(classes), 4), 3]})
    # Counts span orders of magnitude under label skew; a log colour scale keeps
    # the small ones visible, and empty cells stay white.
    masked = [[v if v > 0 else float("nan") for v in row] for row in counts]
    top = max(max(row) for row in counts) if counts else 1
    image = heat_ax.imshow(masked, aspect="auto", cmap="viridis", interpolation="nearest",
                           norm=LogNorm(vmin=1, vmax=max(top, 2)))
    heat_ax.set_xlabel("class")
    heat_ax.set_ylabel("client")
    heat_ax.set_xticks(range(len(classes)))
    heat_ax.set_xticklabels(classes, fontsize=7 if len(classes) > 20 else 9)
    if n_clients <= 60:
        heat_ax.set_yticks(range(n_clients))
        heat_ax.tick_params(axis="y", labelsize=7)
    if len(classes) <= 20 and n_clients <= 40:
        for k, row in enumerate(counts):
            for c, v in enumerate(row):
                if v > 0:
                    heat_ax.text(c, k, str(v), ha="center", va="center", fontsize=6,
                                 color="white" if v < top ** 0.5 else "black")
    fig.colorbar(image, ax=heat_ax, label="examples (log scale)", pad=0.01)

    bar_ax.barh(range(n_clients), sizes, color="#4c72b0")
    bar_ax.set_xlabel("client size")
    bar_ax.grid(axis="x", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = os.path.join(out, "partition.png")
    fig.savefig(path, dpi=120)
    print("wrote " + path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: partition_report.py DIR")
    main(sys.argv[1])
