#!/usr/bin/python3
"""Fixtures for aggregators/fedlaw:fedlaw_official_test: the official server step on saved client models.

Runs the official FedLAW server optimisation (ZexiLee/ICML-2023-FedLAW,
server_funct.fedlaw_optimization and fedlaw_generate_global_model, on the CPU) on a
small problem made here from a seed: a 6-5-3 ReLU MLP (parameters named as fedkit's
`mlp` model names them: layers.0 and layers.2), four client models around a global model, clients of
unequal sizes, and a proxy set of 24 examples. The proxy set is smaller than the
code's batch of 128, so every server epoch is one full batch and the result does
not depend on how either side shuffles it. Writes, for each variant (EXP, EXP with
SWA, QUAD; 20 server epochs, the code's defaults otherwise):

  aggregators/fedlaw/testdata/official_step.pt   tensors: global/<name>,
      client<k>/<name>, client_sizes, proxy_x, proxy_y, and per variant
      <variant>/<name> (the official global model), <variant>/gamma, <variant>/lambda
  aggregators/fedlaw/testdata/official_step.json  the same numbers for people

Regenerate (after fetching the official repository to $OFFICIAL):
  python3 tools/side_by_side/make_fedlaw_fixtures.py --official=$OFFICIAL \
      --out=aggregators/fedlaw/testdata
"""

import argparse
import json
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official_cpu  # pylint: disable=wrong-import-position

CLIENT_SIZES = [30, 12, 50, 8]
VARIANTS = {  # name -> (server_funct, whether_swa)
    'exp': ('exp', 'none'),
    'exp_swa': ('exp', 'swa'),
    'quad': ('quad', 'none'),
}


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--official', required=True, help='checkout of ZexiLee/ICML-2023-FedLAW')
  p.add_argument('--out', required=True, help='folder for official_step.pt and official_step.json')
  flags = p.parse_args()
  official_cpu.import_official(flags.official)
  official_cpu.patch_cuda_to_cpu()
  import torch
  from torch import nn
  import torch.nn.functional as F
  from models_dict.reparam_function import ReparamModule
  from server_funct import fedlaw_optimization, fedlaw_generate_global_model

  class TinyMlp(ReparamModule):
    def __init__(self):
      super().__init__()
      self.layers = nn.ModuleList([nn.Linear(6, 5), nn.Linear(5, 3)])

    def forward(self, x):
      return self.layers[1](F.relu(self.layers[0](x)))

  torch.set_num_threads(1)
  torch.manual_seed(20231)
  # fedkit's `mlp` keeps its ReLUs in the layer list: its linear layers are 0 and 2.
  names = ['layers.0.weight', 'layers.0.bias', 'layers.2.weight', 'layers.2.bias']
  model = TinyMlp()
  global_flat = model.get_param(clone=True).detach()
  # Client models: the global model plus updates of different sizes and directions.
  clients = [global_flat + scale * torch.randn_like(global_flat)
             for scale in (0.3, 0.8, 0.5, 1.2)]
  proxy_x = torch.randn(24, 6)
  proxy_y = torch.randint(0, 3, (24,))

  tensors = {'proxy_x': proxy_x, 'proxy_y': proxy_y,
             'client_sizes': torch.tensor(CLIENT_SIZES, dtype=torch.int64)}
  for n, t in unflatten(global_flat, model, names):
    tensors['global/' + n] = t
  for k, c in enumerate(clients):
    for n, t in unflatten(c, model, names):
      tensors[f'client{k}/{n}'] = t
  size_weights = [s / sum(CLIENT_SIZES) for s in CLIENT_SIZES]
  results = {'client_sizes': CLIENT_SIZES, 'server_epochs': 20, 'variants': {}}
  for variant, (funct, swa) in VARIANTS.items():
    args = types.SimpleNamespace(dataset='fmnist', server_funct=funct, whether_swa=swa,
                                 server_optimizer='adam', server_epochs=20)
    central = types.SimpleNamespace(model=TinyMlp(), validate_set=[(proxy_x, proxy_y)])
    central.model.load_param(global_flat)
    gamma, weights = fedlaw_optimization(args, size_weights, [c.clone() for c in clients], central)
    central = fedlaw_generate_global_model(gamma, weights, clients, central)
    for n, t in unflatten(central.model.get_param(clone=True).detach(), model, names):
      tensors[f'{variant}/{n}'] = t
    tensors[f'{variant}/gamma'] = torch.tensor(float(gamma), dtype=torch.float64)
    tensors[f'{variant}/lambda'] = torch.tensor([float(w) for w in weights], dtype=torch.float64)
    results['variants'][variant] = {'gamma': float(gamma),
                                    'lambda': [float(w) for w in weights]}
    print(variant, results['variants'][variant])
  os.makedirs(flags.out, exist_ok=True)
  torch.save({k: v.contiguous() for k, v in tensors.items()},
             os.path.join(flags.out, 'official_step.pt'))
  with open(os.path.join(flags.out, 'official_step.json'), 'w') as f:
    json.dump(results, f, indent=1)
    f.write('\n')


def unflatten(flat, model, names):
  return [(n, t.view(s).clone()) for n, t, s in zip(
      names, flat.split(model._weights_numels), model._weights_shapes)]


if __name__ == '__main__':
  main()
