"""Writes a CIFAR-10-shaped dataset in CIFAR-10's binary format (data/cifar10 reads it):
data_batch_1.bin ... data_batch_5.bin and test_batch.bin, records of one label byte
and 3x32x32 pixel bytes. Each class is a fixed random image plus per-example noise,
so a CNN learns it within a few rounds. Needs only torch (no numpy), so that it runs
in the GPU machine's own Python.

  python synthetic_cifar.py --dir=DIR [--train=50000] [--test=10000] [--seed=0]
"""

import argparse
import ctypes
import os

import torch


def records(n, templates, generator):
  labels = torch.randint(10, (n,), generator=generator)
  noise = torch.randint(-80, 81, (n, 3072), generator=generator, dtype=torch.int16)
  images = (templates[labels] + noise).clamp(0, 255).to(torch.uint8)
  rows = torch.cat([labels.to(torch.uint8).unsqueeze(1), images], dim=1).contiguous()
  return ctypes.string_at(rows.data_ptr(), rows.numel())


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--dir', required=True)
  parser.add_argument('--train', type=int, default=50000)
  parser.add_argument('--test', type=int, default=10000)
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  if args.train % 5:
    parser.error('--train must be a multiple of 5 (five training files)')
  generator = torch.Generator().manual_seed(args.seed)
  templates = torch.randint(0, 256, (10, 3072), generator=generator, dtype=torch.int16)
  os.makedirs(args.dir, exist_ok=True)
  for i in range(1, 6):
    with open(os.path.join(args.dir, f'data_batch_{i}.bin'), 'wb') as f:
      f.write(records(args.train // 5, templates, generator))
  with open(os.path.join(args.dir, 'test_batch.bin'), 'wb') as f:
    f.write(records(args.test, templates, generator))


if __name__ == '__main__':
  main()
