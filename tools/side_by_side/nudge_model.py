#!/usr/bin/python3
"""Copies a fedkit model.pt with every weight moved one float32 ulp up (or down).

A control for side-by-side runs: how far does float rounding alone carry a run? Run
one implementation from the original and from the nudged model on the same inputs;
the two runs differ by what a rounding-sized change grows into, the yardstick for
how closely two implementations can be expected to agree on those inputs.

  tools/side_by_side/nudge_model.py /tmp/official10/initial_model.pt /tmp/nudged/initial_model.pt
  tools/side_by_side/nudge_model.py --down /tmp/official10/initial_model.pt /tmp/down/initial_model.pt
"""

import argparse

import torch


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('source', help='a model.pt (name -> float tensor), as fedkit writes it')
  p.add_argument('target', help='where to write the nudged copy')
  p.add_argument('--down', action='store_true', help='one ulp towards -inf instead of +inf')
  flags = p.parse_args()
  state = torch.load(flags.source, map_location='cpu')
  nudged = {}
  for name, tensor in state.items():
    if not tensor.is_floating_point():
      raise SystemExit(f'{flags.source}: {name} is {tensor.dtype}, not a float tensor')
    towards = float('-inf') if flags.down else float('inf')
    nudged[name] = torch.nextafter(tensor, torch.full_like(tensor, towards)).contiguous()
  torch.save(nudged, flags.target)


if __name__ == '__main__':
  main()
