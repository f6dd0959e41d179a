#!/usr/bin/env python3
"""FedAvg as a plain PyTorch loop in one Python process: the peer with no
framework. Same data, split, model, local SGD and averaging as the Flower app
(fl_torch.py); clients are trained one after another on one model replica.

  plain_loop.py --data_dir=DIR --partition=partition.json --rounds=100 \
      --clients_per_round=10 --epochs=2 --batch_size=50 --lr=0.05 --result=out.json
"""

import argparse
import json
import random
import sys
import time

import torch

import fl_torch


def run(args):
  if args.threads > 0:
    torch.set_num_threads(args.threads)
  torch.manual_seed(args.seed)
  x, y = fl_torch.load_split(args.data_dir, train=True)
  test_x, test_y = fl_torch.load_split(args.data_dir, train=False)
  clients = fl_torch.read_partition(args.partition, len(y))
  if not 1 <= args.clients_per_round <= len(clients):
    sys.exit(f'--clients_per_round must be in [1, {len(clients)}], got {args.clients_per_round}')
  global_model = fl_torch.mlp(args.hidden)
  replica = fl_torch.mlp(args.hidden)
  sampler = random.Random(args.seed)
  generator = torch.Generator().manual_seed(args.seed)
  curve = []
  for _ in range(args.rounds):
    states, weights = [], []
    for client in sampler.sample(range(len(clients)), args.clients_per_round):
      rows = clients[client]
      replica.load_state_dict(global_model.state_dict())
      fl_torch.train_locally(replica, x[rows], y[rows], args.epochs, args.batch_size, args.lr,
                             generator)
      states.append({k: v.clone() for k, v in replica.state_dict().items()})
      weights.append(len(rows))
    global_model.load_state_dict(fl_torch.weighted_average(states, weights))
    curve.append(fl_torch.evaluate(global_model, test_x, test_y))
  return {'accuracy': curve[-1], 'accuracy_curve': curve,
          'threads': torch.get_num_threads(), 'torch': torch.__version__}


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--data_dir', required=True, help='folder of the four IDX files')
  parser.add_argument('--partition', required=True, help="a fedkit run's partition.json")
  parser.add_argument('--rounds', type=int, required=True)
  parser.add_argument('--clients_per_round', type=int, required=True)
  parser.add_argument('--epochs', type=int, required=True)
  parser.add_argument('--batch_size', type=int, required=True)
  parser.add_argument('--lr', type=float, required=True)
  parser.add_argument('--hidden', type=int, nargs='*', default=[200, 200])
  parser.add_argument('--seed', type=int, default=1)
  parser.add_argument('--threads', type=int, default=0, help="torch's threads; 0: its default")
  parser.add_argument('--result', required=True, help='where the JSON result goes')
  args = parser.parse_args()
  start = time.monotonic()
  result = run(args)
  result['seconds_inside'] = time.monotonic() - start
  with open(args.result, 'w') as f:
    json.dump(result, f)


if __name__ == '__main__':
  main()
