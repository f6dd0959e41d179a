#!/usr/bin/python3
"""The levels runs settle at, grouped by two factors: which implementation
trained and whose shuffler drew the mini-batches (or any other two).

Each run is ROW/COLUMN/LABEL=PATH (an official trace.csv or a fedkit
metrics.csv: round, test_accuracy and gamma columns); its level is its mean test
accuracy over a window of rounds (default 101-200). Prints a markdown table of
the cells (n, mean, sd, range), each factor's effect with the other pooled
(difference of means with Welch's t; ratio of spreads with the F and Levene
tests, p-values where SciPy is installed), and every run's level. Runs that share their batches (a replay and its nudged starts) are not
independent draws: say so where it matters.

  tools/side_by_side/cells.py official/official-drawn/s11=/tmp/official10_rec11/trace.csv \\
      fedkit/official-drawn/s11=/tmp/fedkit_replay11/metrics.csv ...
"""

import argparse
import math
import statistics

from levels import check_window, read


def welch(a, b):
  """(mean(a) - mean(b), t, degrees of freedom); t is nan without two of each."""
  if len(a) < 2 or len(b) < 2:
    return statistics.mean(a) - statistics.mean(b), math.nan, math.nan
  va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
  diff = statistics.mean(a) - statistics.mean(b)
  df = (va + vb)**2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
  return diff, diff / math.sqrt(va + vb), df


def p_values(a, b, t, df, f):
  """Two-sided p of Welch's t, of the variance ratio F and of Levene's test, as
  text; '-' where SciPy (python3-scipy) is not installed."""
  try:
    from scipy import stats  # pylint: disable=import-outside-toplevel
  except ImportError:
    return '-', '-', '-'
  if math.isnan(t):
    return '-', '-', '-'
  p_t = 2 * stats.t.sf(abs(t), df)
  p_f = 2 * min(stats.f.sf(f, len(a) - 1, len(b) - 1), stats.f.cdf(f, len(a) - 1, len(b) - 1))
  return f'{p_t:.2f}', f'{p_f:.3f}', f'{stats.levene(a, b).pvalue:.3f}'


def describe(values):
  sd = statistics.stdev(values) if len(values) > 1 else math.nan
  return '%d | %.2f | %.2f | %.2f-%.2f' % (len(values), statistics.mean(values), sd, min(values),
                                          max(values))


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('runs', nargs='+', help='ROW/COLUMN/LABEL=PATH')
  p.add_argument('--first', type=int, default=101, help='first round of the window')
  p.add_argument('--last', type=int, default=200, help='last round of the window')
  flags = p.parse_args()
  levels = []  # (row, column, label, level)
  for item in flags.runs:
    key, _, path = item.partition('=')
    parts = key.split('/')
    if not path or len(parts) != 3:
      raise SystemExit(f'{item}: expected ROW/COLUMN/LABEL=PATH')
    run = read(path)
    check_window(key, run, flags.first, flags.last)
    window = range(flags.first, flags.last + 1)
    levels.append((parts[0], parts[1], parts[2], statistics.mean(run[t][0] for t in window)))
  rows = list(dict.fromkeys(r for r, _, _, _ in levels))
  columns = list(dict.fromkeys(c for _, c, _, _ in levels))
  print(f'Accuracy over rounds {flags.first}-{flags.last} (%):\n')
  print('| cell | runs | mean | sd | range |')
  print('| --- | ---: | ---: | ---: | --- |')
  for r in rows:
    for c in columns:
      cell = [v for rr, cc, _, v in levels if (rr, cc) == (r, c)]
      if cell:
        print(f'| {r}, {c} | {describe(cell)} |')
  print('\n| factor | levels compared | difference of means | Welch t | df | p | sd ratio | '
        'F (variances) | p (F) | p (Levene) |')
  print('| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for name, index, values in (('rows', 0, rows), ('columns', 1, columns)):
    if len(values) != 2:
      continue
    a = [lv[3] for lv in levels if lv[index] == values[0]]
    b = [lv[3] for lv in levels if lv[index] == values[1]]
    diff, t, df = welch(a, b)
    f = statistics.variance(a) / statistics.variance(b) if len(a) > 1 and len(b) > 1 else math.nan
    p_t, p_f, p_levene = p_values(a, b, t, df, f)
    print(f'| {name} | {values[0]} - {values[1]} | {diff:+.2f} | {t:.2f} | {df:.1f} | {p_t} | '
          f'{math.sqrt(f):.2f} | {f:.2f} | {p_f} | {p_levene} |')
  print('\n| run | level |')
  print('| --- | ---: |')
  for r, c, label, v in levels:
    print(f'| {r}, {c}, {label} | {v:.2f} |')


if __name__ == '__main__':
  main()
