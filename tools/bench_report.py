#!/usr/bin/env python3
"""Writes report.md (and aggregation_time.png) from what bench_report.sh measured.

Aggregation rows come from Google Benchmark's JSON (aggregation.json): names
`aggregate/<aggregator>/K:<k>/P:<p>/<device>` (element-wise aggregators),
`aggregate_proxy/<aggregator>/K:<k>/P:<p>/proxy:<n>/<device>` (aggregators that
train on a server proxy set, timed end to end), and the bounds `bound/stream/...`
(read every update once and accumulate: what any aggregator that must read each
update once cannot beat), `bound/read/...` and `bound/matmul/...`.
"""
import json
import os
import re
import sys

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def load_benchmarks(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        k = re.search(r"K:(\d+)", name)
        p = re.search(r"P:(\d+)", name)
        proxy = re.search(r"proxy:(\d+)", name)
        device = "cuda" if "/cuda" in name else "cpu"
        rows.append({
            "name": name,
            "kind": name.split("/")[0],
            "what": name.split("/")[1] if "/" in name else name,
            "K": int(k.group(1)) if k else None,
            "P": int(p.group(1)) if p else None,
            "proxy": int(proxy.group(1)) if proxy else None,
            "device": device,
            "ns": b["real_time"] * UNIT_NS[b.get("time_unit", "ns")],
            "bytes_per_second": b.get("bytes_per_second"),
            "ns_per_client_param": b.get("ns_per_client_param"),
            "peak_extra_mb": b.get("peak_extra_mb"),
            "input_mb": b.get("input_mb"),
            "server_steps": b.get("server_steps"),
            "ns_per_server_step": b.get("ns_per_server_step"),
            "ns_per_proxy_example": b.get("ns_per_proxy_example"),
            "eval_examples": b.get("eval_examples"),
            "flops": b.get("FLOPS", b.get("flops_per_second")),
        })
    errors = [b["name"] for b in data["benchmarks"] if b.get("error_occurred")]
    return rows, errors, data.get("context", {})


def fmt_time(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} us"


def fmt_count(x):
    """100000 -> 0.1M, 1600000 -> 1.6M; smaller counts as they are."""
    return f"{x / 1e6:g}M" if x >= 1e5 else f"{x:.0f}"


def proxy_section(rows, fedavg, bounds):
    """The aggregate_proxy rows: time vs K, P and proxy size, and the scaling in each."""
    rows = [r for r in rows if r["kind"] == "aggregate_proxy"]
    if not rows:
        return []
    lines = ["", "## Aggregators that train on a proxy set (end to end)", "",
             "Aggregators whose properties declare `uses_proxy` spend their round in forward and "
             "backward passes of the model over the server's proxy set (FedLAW's Es epochs of Adam "
             "on gamma and lambda, Server-FT's fine-tuning, FedDF's distillation from the K client "
             "models), not in one pass over the updates. Each is timed end to end with its default "
             "options (Configure, K Accumulates, Finalize) on a proxy of random inputs of the "
             "synthetic MLP's shape. *server steps* = forward passes with gradients per round; "
             "*per step* = round time / server steps; *per proxy example-epoch* = round time / "
             "examples those steps saw; *eval examples* = examples forwarded without gradients "
             "per round (proxy losses, FedDF's teachers); *vs FedAvg* and *x stream bound* = round "
             "time over FedAvg's and over the streaming bound's at the same K and P.", "",
             "| aggregator | device | K | P | proxy | time / round | server steps | per step | "
             "per proxy example-epoch | eval examples | vs FedAvg | x stream bound | peak extra MB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: (r["what"], r["device"], r["K"], r["P"], r["proxy"])):
        base = fedavg.get((r["K"], r["P"], r["device"]))
        bound = bounds.get(("stream", r["K"], r["P"], r["device"]))
        steps = f"{r['server_steps']:.0f}" if r["server_steps"] is not None else ""
        per_step = fmt_time(r["ns_per_server_step"]) if r["ns_per_server_step"] else ""
        per_example = fmt_time(r["ns_per_proxy_example"]) if r["ns_per_proxy_example"] else ""
        evals = fmt_count(r["eval_examples"]) if r["eval_examples"] is not None else ""
        vs = f"{r['ns'] / base['ns']:.0f}x" if base else ""
        x_bound = f"{r['ns'] / bound['ns']:.0f}x" if bound else ""
        mem = f"{r['peak_extra_mb']:.0f}" if r["peak_extra_mb"] is not None else ""
        lines.append(f"| {r['what']} | {r['device']} | {r['K']} | {r['P']:,} | {r['proxy']} | "
                     f"{fmt_time(r['ns'])} | {steps} | {per_step} | {per_example} | {evals} | "
                     f"{vs} | {x_bound} | {mem} |")

    # Scaling: from each aggregator's smallest shape, change one of K, P, proxy at a time.
    lines += ["", "Scaling: round time relative to the smallest shape (first column), changing "
              "one of K, P and proxy size at a time.", "",
              "| aggregator | device | from (K, P, proxy) | time | K | P | proxy |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    dims = ["K", "P", "proxy"]
    for what, device in sorted({(r["what"], r["device"]) for r in rows}):
        mine = [r for r in rows if r["what"] == what and r["device"] == device]
        start = min(mine, key=lambda r: (r["K"], r["P"], r["proxy"]))
        cells = []
        for d in dims:
            others = [o for o in dims if o != d]
            moved = sorted((r for r in mine if r[d] != start[d] and
                            all(r[o] == start[o] for o in others)), key=lambda r: r[d])
            cells.append(", ".join(f"{fmt_count(r[d])}: {r['ns'] / start['ns']:.1f}x" for r in moved))
        lines.append(f"| {what} | {device} | ({start['K']}, {fmt_count(start['P'])}, "
                     f"{start['proxy']}) | {fmt_time(start['ns'])} | " + " | ".join(cells) + " |")
    return lines


def read_json(path):
    with open(path) as f:
        return json.load(f)


def main(out):
    lines = ["# fedkit cost report", ""]
    with open(os.path.join(out, "machine.txt")) as f:
        lines += ["Machine: " + "; ".join(l.strip() for l in f if l.strip()), ""]

    rows, errors, context = load_benchmarks(os.path.join(out, "aggregation.json"))
    if context.get("library_build_type") == "debug":
        lines += ["Google Benchmark here is Debian's debug build of the library (it says so); "
                  "the timed code is ours, built with -c opt. Compare ratios within this run.", ""]
    bounds = {(r["what"], r["K"], r["P"], r["device"]): r for r in rows if r["kind"] == "bound"}
    aggs = [r for r in rows if r["kind"] == "aggregate"]
    fedavg = {(r["K"], r["P"], r["device"]): r for r in aggs if r["what"] == "fedavg"}

    lines += ["## Aggregation cost", "",
              "One aggregation (Configure, K Accumulates, Finalize) of K client updates of P float32 "
              "parameters. *bound* = the streaming bound (read every update once and accumulate it "
              "into one P-sized sum); *of bound* = bound time / aggregator time (1.0 = at the "
              "memory-bandwidth limit); *vs FedAvg* = aggregator time / FedAvg's time; *reads* = "
              "what the K clients sent (deltas plus extras: SCAFFOLD's control variates, Elastic's "
              "sensitivities) over the K P floats of the deltas, i.e. how many P-sized inputs per "
              "client the aggregator must read where the bound reads one. Aggregators that train on "
              "a proxy set are in the next section.", "",
              "| aggregator | device | K | P | time | GB/s read | ns / client-param | of bound | vs FedAvg | reads | peak extra MB |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(aggs, key=lambda r: (r["what"], r["device"], r["K"], r["P"])):
        bound = bounds.get(("stream", r["K"], r["P"], r["device"]))
        base = fedavg.get((r["K"], r["P"], r["device"]))
        gbps = f"{r['bytes_per_second'] / 1e9:.2f}" if r["bytes_per_second"] else ""
        npcp = f"{r['ns_per_client_param']:.3f}" if r["ns_per_client_param"] is not None else ""
        of_bound = f"{bound['ns'] / r['ns']:.2f}" if bound else ""
        vs = f"{r['ns'] / base['ns']:.2f}x" if base else ""
        mem = f"{r['peak_extra_mb']:.0f}" if r["peak_extra_mb"] is not None else ""
        reads = (f"{r['input_mb'] * 1048576 / (4.0 * r['K'] * r['P']):.1f}x"
                 if r["input_mb"] is not None else "")
        lines.append(f"| {r['what']} | {r['device']} | {r['K']} | {r['P']:,} | {fmt_time(r['ns'])} | "
                     f"{gbps} | {npcp} | {of_bound} | {vs} | {reads} | {mem} |")
    lines += ["", "Bounds:", "", "| bound | device | K | P | time | GB/s |", "| --- | --- | --- | --- | --- | --- |"]
    for r in sorted((r for r in rows if r["kind"] == "bound"), key=lambda r: (r["what"], r["K"] or 0, r["P"] or 0)):
        gbps = f"{r['bytes_per_second'] / 1e9:.2f}" if r["bytes_per_second"] else ""
        lines.append(f"| {r['what']} | {r['device']} | {r['K'] or ''} | "
                     f"{'{:,}'.format(r['P']) if r['P'] else ''} | {fmt_time(r['ns'])} | {gbps} |")
    matmul = [r for r in rows if r["kind"] == "bound" and r["what"] == "matmul"]
    for r in matmul:
        if r["flops"]:
            lines.append(f"\nMatmul roofline ({r['name']}): {r['flops'] / 1e9:.1f} GFLOP/s.")
    lines += proxy_section(rows, fedavg, bounds)
    if errors:
        lines += ["", "Benchmarks that reported an error: " + ", ".join(errors)]

    lines += ["", "## Simulation throughput", "",
              "The FLUTE 'LR on MNIST' task on Fashion-MNIST (experiments/flute_lr.textproto: 1000 "
              "clients, 10 per round, batch 10, lr 0.03, 1 local epoch), and the same with an MLP "
              "784-200-200-10. *centralised* = the same number of optimiser steps of the same model "
              "as one plain loop (tools/centralized_baseline); *ratio* = federated steps/s over "
              "centralised steps/s. Both use every core: the federated run with the runner's "
              "default thread budget (clients in parallel on one worker per core), the "
              "centralised loop as one stream with every thread in the pool its model uses; a "
              "ratio above 1 means parallel clients use the cores better than one stream can.", "",
              "| task | rounds | wall | rounds/s | peak RSS | local steps | federated steps/s | centralised steps/s | ratio |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in ["flute_lr", "flute_mlp"]:
        summary_path = os.path.join(out, name, "summary.json")
        if not os.path.exists(summary_path):
            continue
        s = read_json(summary_path)
        c = read_json(os.path.join(out, name + ".centralized.json"))
        fed = s["local_steps"] / s["wall_seconds"]
        lines.append(f"| {name} | {s['rounds']} | {s['wall_seconds']:.2f} s | {s['rounds'] / s['wall_seconds']:.1f} | "
                     f"{s['peak_rss_mb']:.0f} MB | {s['local_steps']} | {fed:.0f} | "
                     f"{c['steps_per_second']:.0f} | {fed / c['steps_per_second']:.2f} |")
    lines += ["", "Published elsewhere for the LR task, on other hardware: Flower 1.0 30 min 14 s, "
              "FLUTE 3 min 20 s (CPU).", "",
              "## Scale: registered clients", "",
              "The FLUTE LR task with 100 clients per round for 5 rounds; only the number of "
              "registered clients changes.", "",
              "| registered clients | peak RSS | wall |", "| --- | --- | --- |"]
    for clients in [1000, 10000]:
        path = os.path.join(out, f"scale_{clients}", "summary.json")
        if os.path.exists(path):
            s = read_json(path)
            lines.append(f"| {clients:,} | {s['peak_rss_mb']:.0f} MB | {s['wall_seconds']:.2f} s |")

    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plot (apt-get install python3-matplotlib)")
        return
    for k in sorted({r["K"] for r in aggs}):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for what in sorted({r["what"] for r in aggs}):
            pts = sorted((r["P"], r["ns"] / 1e6) for r in aggs if r["what"] == what and r["K"] == k and r["device"] == "cpu")
            if pts:
                ax.loglog([p for p, _ in pts], [t for _, t in pts], marker="o", label=what)
        proxy_rows = [r for r in rows if r["kind"] == "aggregate_proxy" and r["proxy"] == 200]
        for what in sorted({r["what"] for r in proxy_rows}):
            pts = sorted((r["P"], r["ns"] / 1e6) for r in proxy_rows
                         if r["what"] == what and r["K"] == k and r["device"] == "cpu")
            if pts:
                ax.loglog([p for p, _ in pts], [t for _, t in pts], marker="s", linestyle=":",
                          label=f"{what} (proxy 200, end to end)")
        pts = sorted((key[2], r["ns"] / 1e6) for key, r in bounds.items() if key[0] == "stream" and key[1] == k and key[3] == "cpu")
        if pts:
            ax.loglog([p for p, _ in pts], [t for _, t in pts], "k--", label="streaming bound")
        ax.set_xlabel("parameters P")
        ax.set_ylabel("time per aggregation (ms)")
        ax.set_title(f"Aggregation time, K = {k} clients, CPU")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"aggregation_time_K{k}.png"), dpi=120)


if __name__ == "__main__":
    main(sys.argv[1])
