#!/usr/bin/env python3
"""Draws a sweep's curves.png from the JSON the sweep tool writes (report.h).

Usage: curves.py DATA.json OUT.png

Top panel: per variant, the curve column's mean over its seeds per evaluated
round, with the min-max band over the seeds, against the round or the sweep's
curve_x_column ("x": that column's mean over the seeds at each round). One panel
below per diagnostic: each variant's mean over its seeds per round, against the
round. Exits 3 when matplotlib cannot be imported, so that the tool warns
instead of failing the sweep.
"""
import json
import sys
import textwrap


def main(data_path, png_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        print("matplotlib is not importable (apt-get install python3-matplotlib)")
        return 3
    with open(data_path) as f:
        data = json.load(f)
    panels = 1 + len(data["diagnostics"])
    # The diagnostics are per round: they share the curves' axis only when it is the round.
    by_round = data.get("x_column", "round") == "round"
    fig, axes = plt.subplots(panels, 1, figsize=(7.5, 4.5 + 2.5 * (panels - 1)), sharex=by_round,
                             squeeze=False)
    axes = axes[:, 0]
    scale = 100 if data["percent"] else 1
    for i, variant in enumerate(data["variants"]):
        color = f"C{i % 10}"
        x = variant.get("x", variant["rounds"])
        axes[0].plot(x, [scale * v for v in variant["mean"]], color=color,
                     label=f"{variant['label']} ({variant['runs']} seeds)")
        if variant["runs"] > 1:
            axes[0].fill_between(x, [scale * v for v in variant["min"]],
                                 [scale * v for v in variant["max"]], color=color, alpha=0.2,
                                 linewidth=0)
    axes[0].set_ylabel(data["column"] + (" (%)" if data["percent"] else ""))
    # Long titles wrap rather than run off the figure.
    axes[0].set_title(textwrap.fill(f"{data['title']} (band: min-max over seeds)", 80),
                      fontsize=10)
    axes[0].legend(fontsize=8)
    labels = [v["label"] for v in data["variants"]]
    for ax, panel in zip(axes[1:], data["diagnostics"]):
        for variant in panel["variants"]:
            color = f"C{labels.index(variant['label']) % 10}"
            # null (an infinite or undefined value, e.g. epsilon without noise) leaves a gap.
            mean = [float("nan") if v is None else v for v in variant["mean"]]
            ax.plot(variant["rounds"], mean, color=color, linewidth=1, label=variant["label"])
        ax.set_ylabel(f"{panel['name']} (mean)")
        ax.legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    if by_round:
        axes[-1].set_xlabel("round")
        axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        axes[0].set_xlabel(data["x_label"])
        if data["x_integer"]:
            axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in axes[1:]:
            ax.set_xlabel("round")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: curves.py DATA.json OUT.png")
    sys.exit(main(sys.argv[1], sys.argv[2]))
