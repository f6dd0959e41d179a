#!/usr/bin/env python3
"""fedkit beside Flower's simulation and a plain PyTorch loop, on one workload each
time, measured the same way: wall time, CPU time and peak memory of the whole
process tree, and the final test accuracy, with several runs per cell.

  tools/peers/setup.sh        # once: Flower from PyPI in a virtual environment
  bazel run -c opt //tools/peers:compare -- --out=$PWD/experiments/bench_results/peers

Workloads (Fashion-MNIST, the quickstart's MLP, SGD at lr 0.05, batch 50, every
round evaluated on the 10,000 test images): `quickstart` (100 clients with
Dirichlet(0.5) label skew, 10 a round, 2 epochs, 100 rounds) and `many_clients`
(1000 clients, 100 a round, 1 epoch, 20 rounds). Every system trains on the
split fedkit draws (its partition.json).

Systems: `fedkit` and `flower` as they come (fedkit's thread choice, Flower's
default of one CPU per client actor, with OpenBLAS held to it), `plain`
(fl_torch's loop in one Python process, torch's default threads), and
`fedkit_one_core` and `plain_one_core`: pinned to one core (taskset) with one
thread each, the per-core comparison.
"""

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import process_tree  # pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = {
    'quickstart': dict(num_clients=100, clients_per_round=10, epochs=2, rounds=100),
    'many_clients': dict(num_clients=1000, clients_per_round=100, epochs=1, rounds=20),
}
SYSTEMS = ['fedkit', 'flower', 'plain', 'fedkit_one_core', 'plain_one_core']
ONE_CORE = 'simulation { workers: 1 threads_per_worker: 1 }'
HEADER = """# fedkit beside Flower's simulation and a plain PyTorch loop

Command: `bazel run //tools/peers:compare -- {args}` (tools/peers/compare.py says
what each workload and system is); versions in versions.txt, every run in
runs.csv. Cells: median [min, max] of the runs that finished. Wall and CPU
time and peak memory (PSS summed over the process tree) are the whole
command's, start-up included; ratios are of medians, to fedkit's (to
fedkit_one_core's for the one-core rows).

"""


def fedkit_overrides(workload):
  w = WORKLOADS[workload]
  return (f'partition {{ num_clients: {w["num_clients"]} }} '
          f'server {{ rounds: {w["rounds"]} clients_per_round: {w["clients_per_round"]} }} '
          f'client {{ epochs: {w["epochs"]} }}')


def peer_config(workload, data_dir, partition):
  w = WORKLOADS[workload]
  return dict(data_dir=data_dir, partition=partition, hidden=[200, 200], batch_size=50, lr=0.05,
              seed=1, **w)


def command(system, workload, tools, run_dir, data_dir, partition):
  """The command line of one run, and where its result will be."""
  one_core = system.endswith('_one_core')
  pin = ['taskset', '-c', '0'] if one_core else []
  if system.startswith('fedkit'):
    overrides = fedkit_overrides(workload) + (' ' + ONE_CORE if one_core else '')
    return pin + [tools['run_experiment'], f'--spec={tools["spec"]}', f'--output_dir={run_dir}',
                  f'--set={overrides}'], os.path.join(run_dir, 'metrics.csv')
  result = os.path.join(run_dir, 'result.json')
  cfg = peer_config(workload, data_dir, partition)
  if system.startswith('plain'):
    args = [f'--{k}={v}' for k, v in cfg.items() if k not in ('hidden', 'num_clients')]
    return pin + [tools['python'], os.path.join(HERE, 'plain_loop.py'), *args,
                  f'--threads={1 if one_core else 0}', f'--result={result}'], result
  config_path = os.path.join(run_dir, 'config.json')
  with open(config_path, 'w') as f:
    json.dump(cfg, f)
  return [tools['flower_python'], os.path.join(HERE, 'flower_app.py'), f'--config={config_path}',
          f'--result={result}'], result


def final_accuracy(result_path):
  """The last round's test accuracy from a fedkit metrics.csv or a peer's result."""
  if result_path.endswith('.csv'):
    with open(result_path) as f:
      rows = [r for r in csv.DictReader(f) if r.get('test_accuracy')]
    if not rows:
      raise ValueError(f'{result_path}: no row with test_accuracy')
    return float(rows[-1]['test_accuracy'])
  with open(result_path) as f:
    return float(json.load(f)['accuracy'])


def summarize(rows):
  """(workload, system) -> {metric: (median, min, max)} over the runs that finished."""
  cells = {}
  for row in rows:
    if row['returncode'] != 0:
      continue
    cell = cells.setdefault((row['workload'], row['system']), {})
    for metric in ('wall_s', 'cpu_s', 'peak_mib', 'accuracy'):
      cell.setdefault(metric, []).append(row[metric])
  return {key: {m: (statistics.median(v), min(v), max(v)) for m, v in cell.items()}
          for key, cell in cells.items()}


def table(rows):
  """The markdown table: median [min, max] per cell, and ratios of medians to fedkit's."""
  cells = summarize(rows)
  runs = {}
  for row in rows:
    runs.setdefault((row['workload'], row['system']), []).append(row['returncode'])
  lines = ['| workload | system | runs | wall s | CPU s | peak MiB | accuracy | wall / fedkit '
           '| CPU / fedkit | memory / fedkit |', '|' + ' --- |' * 10]
  fmt = lambda t, d: f'{t[0]:.{d}f} [{t[1]:.{d}f}, {t[2]:.{d}f}]'
  for (workload, system), codes in runs.items():
    ok = sum(1 for c in codes if c == 0)
    cell = cells.get((workload, system))
    if cell is None:
      lines.append(f'| {workload} | {system} | 0 of {len(codes)} | failed | | | | | | |')
      continue
    base = cells.get((workload, 'fedkit_one_core' if system.endswith('one_core') else 'fedkit'))
    ratio = lambda m: f'{cell[m][0] / base[m][0]:.2f}x' if base else ''
    lines.append(f'| {workload} | {system} | {ok} of {len(codes)} | {fmt(cell["wall_s"], 1)} '
                 f'| {fmt(cell["cpu_s"], 1)} | {fmt(cell["peak_mib"], 0)} '
                 f'| {fmt(cell["accuracy"], 4)} | {ratio("wall_s")} | {ratio("cpu_s")} '
                 f'| {ratio("peak_mib")} |')
  return '\n'.join(lines) + '\n'


def versions(tools):
  def output(cmd):
    try:
      return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
      return f'unavailable ({e})'
  probe = 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'
  flower_probe = probe + '; import flwr, ray; print("flwr", flwr.__version__, "ray", ray.__version__)'
  lines = [f'date: {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}',
           f'machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}',
           f'python: {output([tools["python"], "--version"])}',
           f'python (plain loop): {output([tools["python"], "-c", probe])}',
           f'flower venv: {output([tools["flower_python"], "-c", flower_probe])}',
           f'fedkit: {output(["git", "-C", tools["workspace"], "rev-parse", "--short", "HEAD"])}']
  return '\n'.join(lines) + '\n'


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  workspace = os.environ.get('BUILD_WORKSPACE_DIRECTORY', os.getcwd())
  parser.add_argument('--out', required=True, help='folder for runs.csv, table.md and logs')
  parser.add_argument('--runs', type=int, default=3)
  parser.add_argument('--workloads', nargs='*', default=list(WORKLOADS), choices=list(WORKLOADS))
  parser.add_argument('--systems', nargs='*', default=SYSTEMS, choices=SYSTEMS)
  parser.add_argument('--data_dir', default='/usr/share/datasets/fashion-mnist')
  parser.add_argument('--run_experiment', default=os.path.join(HERE, '..', 'run_experiment'))
  parser.add_argument('--spec', default=os.path.join(workspace, 'experiments/quickstart.textproto'))
  parser.add_argument('--python', default='/usr/bin/python3',
                      help="the plain loop's interpreter (Debian's, with its torch)")
  parser.add_argument('--flower_python',
                      default=os.path.expanduser('~/.cache/fedkit-peers/venv/bin/python'),
                      help="the interpreter of tools/peers/setup.sh's virtual environment")
  args = parser.parse_args()
  tools = dict(run_experiment=os.path.abspath(args.run_experiment), spec=args.spec,
               python=args.python, flower_python=args.flower_python, workspace=workspace)
  if 'flower' in args.systems and not os.path.exists(args.flower_python):
    sys.exit(f'--flower_python: {args.flower_python} does not exist; run tools/peers/setup.sh')
  if any(s.endswith('one_core') for s in args.systems) and shutil.which('taskset') is None:
    sys.exit('the one-core systems need taskset (util-linux)')
  os.makedirs(args.out, exist_ok=True)
  with open(os.path.join(args.out, 'versions.txt'), 'w') as f:
    f.write(versions(tools))
  rows = []
  for workload in args.workloads:
    inputs = os.path.join(args.out, 'inputs', workload)
    prepared = subprocess.run(
        [tools['run_experiment'], f'--spec={tools["spec"]}', f'--output_dir={inputs}',
         f'--set={fedkit_overrides(workload)} server {{ rounds: 1 }} output {{ write_inputs: true }}'],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if prepared.returncode != 0:
      sys.exit(f'{workload}: fedkit could not draw the split:\n{prepared.stderr}')
    partition = os.path.join(inputs, 'partition.json')
    for run in range(1, args.runs + 1):
      for system in args.systems:  # interleaved, so that drift spreads over every system
        run_dir = os.path.join(args.out, 'runs', workload, system, str(run))
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(run_dir)
        cmd, result = command(system, workload, tools, run_dir, args.data_dir, partition)
        env = dict(os.environ)
        if system.endswith('one_core'):
          env.update(OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1')
        elif system == 'flower':
          # Flower gives each client actor one CPU and Ray sets OMP_NUM_THREADS to
          # match, but Debian's OpenBLAS reads its own variable: left at one thread
          # per core in every actor, its waiting threads spin on sched_yield and a
          # 5-round run took minutes of system time instead of 9 s.
          env.update(OPENBLAS_NUM_THREADS='1')
        with open(os.path.join(run_dir, 'log.txt'), 'w') as log:
          m = process_tree.measure(cmd, log, env=env)
        accuracy = final_accuracy(result) if m.returncode == 0 else float('nan')
        row = dict(workload=workload, system=system, run=run, returncode=m.returncode,
                   wall_s=round(m.wall_s, 2), cpu_s=round(m.cpu_s, 2),
                   peak_mib=round(m.peak_pss_bytes / 2**20, 1), accuracy=accuracy,
                   processes=m.processes)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(args.out, 'runs.csv'), 'w', newline='') as f:
          writer = csv.DictWriter(f, fieldnames=list(row))
          writer.writeheader()
          writer.writerows(rows)
  with open(os.path.join(args.out, 'table.md'), 'w') as f:
    f.write(HEADER.format(args=' '.join(sys.argv[1:])) + table(rows))
  print(table(rows))


if __name__ == '__main__':
  main()
