#!/usr/bin/python3
"""Statistics of recorded mini-batch orders (fedkit's client.batch_order_record_dir
with FedLAW's proxy_order_record_dir, or fedlaw.py --record_order), to tell
whether two shufflers draw from one distribution:

- Spearman correlation of a client's order between its first two epochs of a
  round, and between its first epochs of consecutive rounds; the same for the
  proxy set's orders (server epochs 1 and 2; consecutive rounds). Independent
  uniform permutations of n items give mean 0 and sd 1/sqrt(n - 1).
- The class mix of every full mini-batch: the chi-square of its class counts
  against the client's own class mix, divided by the finite-population factor
  (N - b) / (N - 1), whose mean under a uniform permutation is the number of the
  client's classes minus 1, averaged over the clients.

  tools/side_by_side/order_stats.py official=/tmp/orders11 fedkit=/tmp/fedkit_orders12 \\
      --labels=/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz
"""

import argparse
import gzip
import os

import numpy as np


def read_orders(path):
  with open(path) as f:
    return [np.array(line.split(), dtype=np.int64) for line in f if line.strip()]


def spearman(a, b):
  """Rank correlation of two permutations of the same items."""
  pos_a = np.empty(a.max() + 1, dtype=np.int64)
  pos_b = np.empty(a.max() + 1, dtype=np.int64)
  pos_a[a] = np.arange(len(a))
  pos_b[b] = np.arange(len(b))
  return np.corrcoef(pos_a[a], pos_b[a])[0, 1]


def folder_stats(folder, labels, batch):
  rounds = sorted(int(r) for r in os.listdir(folder) if r.isdigit())
  epochs, across, proxy_epochs, proxy_rounds, chis = [], [], [], [], []
  previous = {}
  for r in rounds:
    here = os.path.join(folder, str(r))
    current = {}
    for name in sorted(os.listdir(here)):
      orders = read_orders(os.path.join(here, name))
      current[name] = orders
      if len(orders) >= 2:
        (proxy_epochs if name == 'proxy.txt' else epochs).append(spearman(orders[0], orders[1]))
      if name in previous and len(previous[name][0]) == len(orders[0]):
        (proxy_rounds if name == 'proxy.txt' else across).append(
            spearman(previous[name][0], orders[0]))
      if name == 'proxy.txt' or labels is None:
        continue
      for order in orders:
        y = labels[order]
        n = len(y)
        if n <= batch:
          continue
        expected = np.bincount(y, minlength=labels.max() + 1) / n * batch
        present = expected > 0
        correction = (n - batch) / (n - 1)
        for start in range(0, n - batch + 1, batch):
          counts = np.bincount(y[start:start + batch], minlength=len(expected))
          chis.append(((counts - expected)**2)[present].dot(1 / expected[present]) / correction)
    previous = current
  return {'rounds': len(rounds), 'epochs': epochs, 'across_rounds': across,
          'proxy_epochs': proxy_epochs, 'proxy_rounds': proxy_rounds, 'batch_chi2': chis}


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('folders', nargs='+', help='LABEL=FOLDER of recorded orders')
  p.add_argument('--labels', help='the training labels (IDX, optionally gzip) for the class mix')
  p.add_argument('--batch', type=int, default=128, help='the clients\' mini-batch size')
  flags = p.parse_args()
  labels = None
  if flags.labels:
    opener = gzip.open if flags.labels.endswith('.gz') else open
    with opener(flags.labels, 'rb') as f:
      labels = np.frombuffer(f.read()[8:], dtype=np.uint8).astype(np.int64)
  print('| orders | rounds | client epochs 1-2 | consecutive rounds | proxy epochs 1-2 | '
        'proxy, consecutive rounds | batches | batch class-mix chi2 |')
  print('| --- | ---: | --- | --- | --- | --- | ---: | --- |')
  for item in flags.folders:
    label, _, folder = item.partition('=')
    s = folder_stats(folder, labels, flags.batch)

    def mean_sd(values, digits=4):
      if not values:
        return '-'
      return f'{np.mean(values):+.{digits}f} (sd {np.std(values):.{digits}f}, n {len(values)})'

    chi = s['batch_chi2']
    print(f'| {label} | {s["rounds"]} | {mean_sd(s["epochs"])} | {mean_sd(s["across_rounds"])} | '
          f'{mean_sd(s["proxy_epochs"])} | {mean_sd(s["proxy_rounds"])} | {len(chi)} | '
          f'{mean_sd(chi, 3) if chi else "-"} |')


if __name__ == '__main__':
  main()
