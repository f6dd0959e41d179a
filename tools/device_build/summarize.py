"""Turns the output folder of gpu_check.sh into one Markdown page (summary.md): the
machine, the checks, accuracy and time per round on the device and on CPU, the local
step of fedkit beside plain PyTorch eager, and GPU memory. Standard library only, so
it runs in any Python.

  python summarize.py OUT_DIR > OUT_DIR/summary.md
"""

import csv
import json
import os
import sys


def load_json(path):
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def peak_memory_mb(out, name):
  """Peak minus first sample of nvidia-smi's used memory (MiB), or None."""
  try:
    with open(os.path.join(out, f'memory_{name}.csv')) as f:
      used = [float(row[0]) for row in csv.reader(f) if row and row[0].strip()]
  except (OSError, ValueError):
    return None
  return max(used) - used[0] if used else None


def fmt(value, spec='.4f'):
  return '-' if value is None else format(value, spec)


def main():
  out = sys.argv[1]
  lines = ['# fedkit GPU check', '']
  with open(os.path.join(out, 'machine.txt')) as f:
    lines += ['```', f.read().rstrip(), '```', '']
  with open(os.path.join(out, 'steps.log')) as f:
    failed = [l.strip() for l in f if l.startswith('FAILED')]
  lines += ['Checks: ' + ('every step passed' if not failed else '; '.join(failed)), '']
  parity = os.path.join(out, 'device_parity_test.log')
  if os.path.exists(parity):
    with open(parity) as f:
      rows = [l.split() for l in f if l.startswith('device_parity ')]
    for row in rows:
      lines.append(f'- local epoch on the device against CPU, {row[1]}: relative difference {row[3]}')
    if not rows:
      lines.append('- device parity: skipped (no CUDA device)')
    lines.append('')

  lines += ['## Runs', '', '| run | rounds | final test accuracy | wall s | s per round (with evaluation) | '
            'GPU memory (nvidia-smi peak, MiB) |', '| --- | ---: | ---: | ---: | ---: | ---: |']
  for name in sorted(os.listdir(out)):
    summary = load_json(os.path.join(out, name, 'summary.json'))
    if not summary or name in ('no_gpu', 'wheel_run'):
      continue
    rounds = summary['rounds']
    lines.append(f'| {name} | {rounds} | {fmt(summary["final_test_accuracy"])} | '
                 f'{fmt(summary["wall_seconds"], ".1f")} | '
                 f'{fmt(summary["wall_seconds"] / rounds, ".3f")} | {fmt(peak_memory_mb(out, name), ".0f")} |')
  lines.append('')

  step = load_json(os.path.join(out, 'fedkit_step.json'))
  peer = load_json(os.path.join(out, 'eager_peer.json'))
  lines += ['## Local step and round: fedkit beside plain PyTorch eager', '',
            '| case | fedkit step us | fedkit floor us (forward+backward) | eager step us | '
            'eager round s | eager max allocated MiB |', '| --- | ---: | ---: | ---: | ---: | ---: |']
  for case, peer_case in (('quickstart', 'quickstart_mlp'), ('lenet5_cifar', 'lenet5_cifar')):
    per_step = {}
    for bench in (step or {}).get('benchmarks', []):
      kind, bench_case = bench['name'].split('/')[:2]  # e.g. step/quickstart/real_time
      if bench_case == case and 'seconds_per_step' in bench:
        per_step[kind] = bench['seconds_per_step'] * 1e6
    row = (peer or {}).get(peer_case, {})
    eager_step = row.get('seconds_per_step')
    lines.append(f'| {case} | {fmt(per_step.get("step"), ".1f")} | {fmt(per_step.get("floor"), ".1f")} | '
                 f'{fmt(eager_step * 1e6 if eager_step else None, ".1f")} | '
                 f'{fmt(row.get("seconds_per_round"), ".3f")} | {fmt(row.get("max_memory_allocated_mb"), ".0f")} |')
  if peer:
    lines += ['', f'Eager: torch {peer.get("torch")} on {peer.get("gpu", peer.get("device"))}, '
              f'{peer.get("threads")} CPU threads; its round is '
              f'{peer.get("quickstart_mlp", {}).get("round_shape", "-")} for the MLP.']
  for name in ('fedkit_step', 'eager_peer'):
    mb = peak_memory_mb(out, name)
    if mb is not None:
      lines.append(f'- GPU memory, nvidia-smi peak over {name}: {mb:.0f} MiB')
  wheel = os.path.join(out, 'wheel.log')
  if os.path.exists(wheel):
    with open(wheel) as f:
      lines += ['', '## The wheel', '', '```', f.read().rstrip()[-1500:], '```']
  print('\n'.join(lines))


if __name__ == '__main__':
  main()
