#!/usr/bin/env python3
"""Runs the thread-budget grid for tools/thread_grid.sh and writes its report.

Each spec runs under every configuration below, `repeats` times, as a whole
process; the median wall time is reported, with min and max. The runner's own
choice ("default": nothing set) is compared with the fastest hand-picked one.
The final test accuracy of every run is reported too: it must not depend on the
configuration.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np

SPECS = [
    ("quickstart (100 clients Dir(0.5), 10/round, MLP 784-200-200-10, SGD, 20 rounds)",
     "experiments/quickstart.textproto", "server { rounds: 20 }"),
    ("MLP 784-64-32-10, 4 IID clients, 5 epochs Adam, batch 64, 2 rounds",
     "experiments/thread_grid/mlp_adam.textproto", ""),
    ("LeNet-5 on CIFAR-shaped data, 4 IID clients, 1 epoch SGD, batch 64, 2 rounds",
     "experiments/thread_grid/lenet5_cifar.textproto", None),  # dir filled in below
]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
SLOW = 2.0

# (label, simulation fields, environment)
CONFIGS = [("default", "", {})]
for workers in (1, 2):
    CONFIGS.append((f"workers {workers}", f"workers: {workers}", {}))
for workers in (1, 2):
    for threads in (1, 2):
        CONFIGS.append((f"workers {workers}, threads_per_worker {threads}",
                        f"workers: {workers} threads_per_worker: {threads}", {}))
for workers in (1, 2):
    for omp, blas in ((1, 1), (2, 2)):
        CONFIGS.append((f"workers {workers}, env OMP={omp} OPENBLAS={blas}",
                        f"workers: {workers}",
                        {"OMP_NUM_THREADS": str(omp), "OPENBLAS_NUM_THREADS": str(blas)}))
for omp, blas in ((2, 1), (1, 2)):
    CONFIGS.append((f"workers 1, env OMP={omp} OPENBLAS={blas}", "workers: 1",
                    {"OMP_NUM_THREADS": str(omp), "OPENBLAS_NUM_THREADS": str(blas)}))


def write_synthetic_cifar(folder, train, test, seed=0):
    """CIFAR-10's binary format: records of 1 label byte then 3x32x32 pixels.

    Each class has its own mean image, so the task is learnable; timings do not
    depend on the pixel values.
    """
    rng = np.random.default_rng(seed)
    means = rng.uniform(64, 192, size=(10, 3072))
    os.makedirs(folder, exist_ok=True)

    def records(n):
        labels = rng.integers(0, 10, size=n)
        pixels = np.clip(means[labels] + rng.normal(0, 96, size=(n, 3072)), 0, 255)
        out = np.empty((n, 3073), dtype=np.uint8)
        out[:, 0] = labels
        out[:, 1:] = pixels.astype(np.uint8)
        return out.tobytes()

    per_file = train // 5
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}.bin"), "wb") as f:
            f.write(records(per_file))
    with open(os.path.join(folder, "test_batch.bin"), "wb") as f:
        f.write(records(test))


def run(runner, spec, override, simulation, env_set, out_dir):
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update(env_set)
    fragment = " ".join(x for x in (override, f"simulation {{ {simulation} }}" if simulation else "")
                        if x)
    cmd = [runner, f"--spec={spec}", f"--output_dir={out_dir}"]
    if fragment:
        cmd.append(f"--set={fragment}")
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    return wall, summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runner", required=True)
    parser.add_argument("--specs", required=True, help="repository root holding the specs")
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="thread_grid_")
    try:
        cifar = os.path.join(scratch, "cifar-10-batches-bin")
        write_synthetic_cifar(cifar, train=8000, test=2000)
        rows = []
        for title, spec, override in SPECS:
            if override is None:
                override = ('dataset { options { [type.googleapis.com/fedkit.data.Cifar10Options]'
                            f' {{ dir: "{cifar}" }} }} }}')
            default_wall = None
            for label, simulation, env in CONFIGS:
                walls, summary = [], None
                for _ in range(args.repeats):
                    wall, summary = run(args.runner, os.path.join(args.specs, spec), override,
                                        simulation, env, os.path.join(scratch, "run"))
                    walls.append(wall)
                    # Twice the default's time is no contender: one run tells.
                    if default_wall is not None and wall > SLOW * default_wall:
                        break
                if default_wall is None:
                    default_wall = statistics.median(walls)
                threads = summary["threads"]
                rows.append({
                    "spec": title, "config": label,
                    "workers": threads["workers"],
                    "worker_intra_op": threads["worker_intra_op_threads"],
                    "worker_blas": threads["worker_blas_threads"],
                    "server_intra_op": threads["server_intra_op_threads"],
                    "server_blas": threads["server_blas_threads"],
                    "runs": len(walls),
                    "median_s": statistics.median(walls), "min_s": min(walls),
                    "max_s": max(walls),
                    "final_test_accuracy": summary["final_test_accuracy"],
                    "final_test_loss": summary["final_test_loss"],
                    "reason": threads["reason"],
                })
                print(f"{title[:40]:40}  {label:42} {statistics.median(walls):7.2f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_report(args.out, rows, args.repeats)


def write_report(out, rows, repeats):
    columns = list(rows[0].keys())
    with open(os.path.join(out, "grid.csv"), "w") as f:
        f.write(",".join(columns) + "\n")
        for r in rows:
            f.write(",".join(f'"{r[c]}"' if isinstance(r[c], str) else str(r[c])
                             for c in columns) + "\n")
    cores = os.cpu_count()
    lines = [
        "# Thread budget: the runner's choice against hand-picked ones",
        "",
        f"Made by `bazel run -c opt //tools:thread_grid -- --out experiments/bench_results/threads"
        f" --repeats {repeats}` on a machine with {cores} cores (see ../machine.txt). Each row is"
        f" the median (min-max) whole-process wall time of {repeats} runs (one run when it took"
        f" over {SLOW:g} times the default's), set-up and data loading included. `default` sets"
        " nothing: no simulation fields, no thread variables."
        " Threads are shown as intra-op/OpenBLAS per worker while clients train, and for the"
        " server while the workers wait.",
        "",
    ]
    for spec in dict.fromkeys(r["spec"] for r in rows):
        group = [r for r in rows if r["spec"] == spec]
        default = next(r for r in group if r["config"] == "default")
        hand = [r for r in group if r["config"] != "default"]
        best = min(hand, key=lambda r: r["median_s"])
        accuracies = {r["final_test_accuracy"] for r in group}
        ratio = default["median_s"] / best["median_s"]
        lines += [
            f"## {spec}",
            "",
            f"Default: {default['median_s']:.2f} s; fastest hand-picked ({best['config']}):"
            f" {best['median_s']:.2f} s; default / fastest = {ratio:.3f}"
            f" ({'within' if ratio <= 1.10 else 'NOT within'} 10%). Final test accuracy over all"
            f" configurations: {', '.join(str(a) for a in sorted(accuracies))}.",
            "",
            f"The runner's reason: {default['reason']}",
            "",
            "| configuration | workers | worker threads | server threads | wall (s) | vs default |",
            "|---|---|---|---|---|---|",
        ]
        for r in group:
            wall = (f"{r['median_s']:.2f} ({r['min_s']:.2f}-{r['max_s']:.2f})" if r["runs"] > 1
                    else f"{r['median_s']:.2f} (1 run)")
            lines.append(
                f"| {r['config']} | {r['workers']} | {r['worker_intra_op']}/{r['worker_blas']} |"
                f" {r['server_intra_op']}/{r['server_blas']} | {wall} |"
                f" {r['median_s'] / default['median_s']:.2f} |")
        lines.append("")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"report: {os.path.join(out, 'report.md')}")


if __name__ == "__main__":
    main()
