"""The quickstart from Python, with any aggregator, the Python examples among them:

  bazel build //fl/python:fedkit
  PYTHONPATH=fl/python:fl/python/examples /usr/bin/python3 fl/python/examples/quickstart.py \
      --aggregator=python_fedavg --rounds=20 --out=/tmp/quickstart_py

Prints each round's test accuracy. Timing it against --aggregator=fedavg with
farm-bench gives the per-round cost of an aggregator written in Python
(docs/python.md)."""

import argparse

import fedkit
from fedavg import FedAvg
from fedavgm import FedAvgM


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--aggregator', default='fedavg')
  parser.add_argument('--rounds', type=int, default=100)
  parser.add_argument('--out', default='/tmp/quickstart_py')
  args = parser.parse_args()
  fedkit.register_aggregator('python_fedavg', FedAvg)
  fedkit.register_aggregator('python_fedavgm', FedAvgM)
  spec = fedkit.load_spec('experiments/quickstart.textproto').with_overrides(
      f'server {{ rounds: {args.rounds} }} aggregator {{ name: "{args.aggregator}" }}')
  fedkit.run(spec, args.out, on_round=lambda row, model: print(row['round'], row['test_accuracy']))


if __name__ == '__main__':
  main()
