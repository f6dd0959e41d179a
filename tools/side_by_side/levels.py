#!/usr/bin/python3
"""The level each run settles at, and how far apart every two runs are.

For runs of FedLAW on the same inputs (the official code's trace.csv, fedkit's
metrics.csv: both have round, test_accuracy and gamma columns): each run's mean
test accuracy over a window of rounds (default 101-200) and over its last 10
rounds, its mean gamma over the window; then for every pair the mean absolute
per-round difference over all rounds, the difference of their window means, and
in how many of the window's rounds the first lies below the second. Markdown.

  tools/side_by_side/levels.py official=/tmp/official10_rec11/trace.csv \\
      fedkit=/tmp/fedkit_replay11/metrics.csv ...
"""

import argparse
import csv
import itertools
import statistics


def read(path):
  with open(path) as f:
    rows = list(csv.DictReader(f))
  if not rows or not {'round', 'test_accuracy', 'gamma'} <= rows[0].keys():
    raise SystemExit(f'{path}: expected the columns round, test_accuracy and gamma')
  return {int(r['round']): (100 * float(r['test_accuracy']), float(r['gamma'])) for r in rows}


def check_window(label, run, first, last):
  """Exits naming the first round of first..last that `run` lacks."""
  missing = [t for t in range(first, last + 1) if t not in run]
  if missing:
    raise SystemExit(f'{label}: no round {missing[0]} (the window is {first}-{last})')


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('runs', nargs='+', help='LABEL=PATH, two or more')
  p.add_argument('--first', type=int, default=101, help='first round of the window')
  p.add_argument('--last', type=int, default=200, help='last round of the window')
  flags = p.parse_args()
  runs = {}
  for item in flags.runs:
    label, _, path = item.partition('=')
    if not path:
      raise SystemExit(f'{item}: expected LABEL=PATH')
    runs[label] = read(path)
  window = range(flags.first, flags.last + 1)
  for label, run in runs.items():
    check_window(label, run, flags.first, flags.last)
  print(f'| run | accuracy, rounds {flags.first}-{flags.last} | last 10 rounds | gamma, rounds {flags.first}-{flags.last} |')
  print('| --- | --- | --- | --- |')
  for label, run in runs.items():
    last = sorted(run)[-10:]
    print('| %s | %.2f | %.2f | %.4f |' % (label, statistics.mean(run[t][0] for t in window),
                                          statistics.mean(run[t][0] for t in last),
                                          statistics.mean(run[t][1] for t in window)))
  print()
  print(f'| pair | mean per-round difference, accuracy | gamma | level difference, rounds {flags.first}-{flags.last} | rounds the first is lower |')
  print('| --- | --- | --- | --- | --- |')
  for a, b in itertools.combinations(runs, 2):
    common = sorted(set(runs[a]) & set(runs[b]))
    per_round = statistics.mean(abs(runs[a][t][0] - runs[b][t][0]) for t in common)
    gamma = statistics.mean(abs(runs[a][t][1] - runs[b][t][1]) for t in common)
    level = statistics.mean(runs[a][t][0] - runs[b][t][0] for t in window)
    lower = sum(runs[a][t][0] < runs[b][t][0] for t in window)
    print('| %s vs %s | %.2f | %.4f | %+.2f | %d of %d |' % (a, b, per_round, gamma, level, lower,
                                                          len(window)))


if __name__ == '__main__':
  main()
