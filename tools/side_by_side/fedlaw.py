#!/usr/bin/python3
"""The official FedLAW code on the CPU, on its own inputs or on fedkit's, with a per-round trace.

Drives the functions of ZexiLee/ICML-2023-FedLAW (a checkout you fetched; nothing of
it is in this repository) round by round as its main_fedlaw.py does, with the same
arguments, and records what fedkit's metrics.csv records for FedLAW: test accuracy,
gamma, the lambdas (their entropy and largest value) and the clients' mean training
loss. Fashion-MNIST and its MLP, the setting of the paper's Table 3.

  # The official run on its own split, exporting that split, proxy set and initial
  # model in fedkit's formats (docs/identical-inputs.md):
  tools/side_by_side/fedlaw.py --official=$HOME/ICML-2023-FedLAW --seed=10 \
      --alpha=0.1 --out=/tmp/official_seed10 --export
  # The official code on a fedkit run's inputs (its output.write_inputs files):
  tools/side_by_side/fedlaw.py --official=... --seed=10 --out=/tmp/official_on_fedkit \
      --inputs=results/fedlaw_fmnist
  # Both traces side by side:
  tools/side_by_side/fedlaw.py --compare /tmp/official_seed10/trace.csv results/x/metrics.csv
  # The official code on the mini-batches a fedkit run drew (client {
  # batch_order_record_dir: D } and FedLAW's proxy_order_record_dir: D):
  tools/side_by_side/fedlaw.py --official=... --seed=10 --out=/tmp/official_on_fedkit_batches \
      --inputs=results/fedlaw_fmnist --client_valid_ratio=0 --replay_order=D

Output: <out>/trace.csv (round, test_accuracy, gamma, lambda_entropy, lambda_max,
train_loss, lr) and, with --export, <out>/partition.json, proxy.json and
initial_model.pt. Needs Debian's python3-torch and python3-torchvision
(tools/side_by_side/setup.sh).
"""

import argparse
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official_cpu  # pylint: disable=wrong-import-position


def parse_flags():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--official', help='checkout of ZexiLee/ICML-2023-FedLAW')
  p.add_argument('--out', help='folder for trace.csv and exported inputs')
  p.add_argument('--seed', type=int, default=10, help="the code's --random_seed")
  p.add_argument('--alpha', type=float, default=0.1, help="the code's --dirichlet_alpha")
  p.add_argument('--rounds', type=int, default=200, help="the code's --T")
  p.add_argument('--epochs', type=int, default=3, help="the code's --E (Table 3: 3)")
  p.add_argument('--clients', type=int, default=20, help="the code's --node_num")
  p.add_argument('--batchsize', type=int, default=128,
                 help="the code's --batchsize and --validate_batchsize (clients' and proxy "
                      "batches); one larger than every share makes each epoch one full batch, "
                      "so the run no longer depends on batch order")
  p.add_argument('--in_order', action='store_true',
                 help="no shuffling: every client's batches in its partition.json order and the "
                      "proxy batches in proxy.json's, every epoch (fedkit: client { batch_order: "
                      "IN_ORDER } and FedLAW's proxy_in_order); needs --inputs and "
                      "--client_valid_ratio=0, so that nothing random is left but the float sums")
  p.add_argument('--record_order', metavar='DIR',
                 help="write every shuffled epoch's order as fedkit replays it: DIR/<round>/<client>.txt "
                      "(dataset indices) and DIR/<round>/proxy.txt (positions in proxy.json), one line "
                      "per epoch (fedkit: client { batch_order: FROM_FILE batch_order_dir: DIR } and "
                      "FedLAW's proxy_order_dir: DIR); needs --inputs and --client_valid_ratio=0. "
                      "Recording draws nothing from the random streams: the run is the same as without it")
  p.add_argument('--replay_order', metavar='DIR',
                 help="train on recorded orders instead of the code's shuffles: every epoch of a "
                      "client's loader and of the proxy loader takes the next line of "
                      "DIR/<round>/<client>.txt (dataset indices) or DIR/<round>/proxy.txt (positions "
                      "in proxy.json), the format --record_order writes and fedkit's "
                      "client.batch_order_record_dir and FedLAW's proxy_order_record_dir record; "
                      "needs --inputs and --client_valid_ratio=0")
  p.add_argument('--client_valid_ratio', type=float, default=0.3,
                 help="share of each client's examples held out and never trained on (the code's 0.3)")
  p.add_argument('--inputs', help='folder with a fedkit run\'s partition.json, initial_model.pt and '
                 'proxy.json (output.write_inputs); each replaces what the code would draw')
  p.add_argument('--export', action='store_true',
                 help="write the code's own split (what each client trains on), proxy set and "
                 'initial model in fedkit\'s formats')
  p.add_argument('--fmnist_dir', default='/usr/share/datasets/fashion-mnist',
                 help='Fashion-MNIST IDX files, gzipped or not')
  p.add_argument('--cache', default='/tmp/fedkit-side-by-side', help='scratch folder')
  p.add_argument('--compare', nargs=2, metavar=('TRACE_CSV', 'FEDKIT_METRICS_CSV'),
                 help='print an official trace beside a fedkit metrics.csv and exit')
  flags = p.parse_args()
  if not flags.compare and not (flags.official and flags.out):
    p.error('--official and --out are required (or --compare)')
  if flags.in_order and not (flags.inputs and flags.client_valid_ratio == 0):
    p.error('--in_order needs --inputs and --client_valid_ratio=0: a hold-out is drawn at random')
  if flags.record_order and not (flags.inputs and flags.client_valid_ratio == 0 and not flags.in_order):
    p.error('--record_order needs --inputs and --client_valid_ratio=0 (fedkit must train on the same '
            'shares), and shuffling (not --in_order)')
  if flags.replay_order and not (flags.inputs and flags.client_valid_ratio == 0 and
                                 not flags.in_order and not flags.record_order):
    p.error('--replay_order needs --inputs and --client_valid_ratio=0 (the orders index the '
            'shares of partition.json), and neither --in_order nor --record_order')
  return flags


def official_args(flags):
  """The code's own argument parser, given the command line main_fedlaw.py would get."""
  from args import args_parser
  saved, sys.argv = sys.argv, [
      'main_fedlaw.py', '--dataset', 'fmnist', '--local_model', 'MLP',
      '--node_num', str(flags.clients), '--T', str(flags.rounds), '--E', str(flags.epochs),
      '--dirichlet_alpha', str(flags.alpha), '--random_seed', str(flags.seed),
      '--client_valid_ratio', str(flags.client_valid_ratio),
      '--batchsize', str(flags.batchsize), '--validate_batchsize', str(flags.batchsize)]
  try:
    args = args_parser()
  finally:
    sys.argv = saved
  args.server_method = 'fedlaw'
  return args


def parameter_names(model):
  """fedkit's names of the MLP's parameters, in the order of the code's flat vector.

  The code's MLP names its linear layers layers.0, layers.1, layers.2; fedkit's `mlp`
  keeps a ReLU after each hidden layer in the same list, so they are layers.0, 2, 4.
  Read from the model, not from a new one: building a model would draw from the
  random stream the run's batches come from.
  """
  paths = {id(m): path for path, m in model.named_modules()}
  names = []
  for module, kind in model._weights_module_names:
    prefix, index = paths[id(module)].split('.')
    names.append(f'{prefix}.{2 * int(index)}.{kind}')
  return names


def flatten(tensors):
  import torch
  return torch.cat([t.reshape(-1) for t in tensors])


def unflatten(flat, model):
  return [(n, t.view(s)) for n, t, s in zip(
      parameter_names(model), flat.split(model._weights_numels), model._weights_shapes)]


def replace_proxy_set(central_node, data, proxy_indices, args, shuffle=True):
  """The server's proxy set becomes `proxy_indices` of the test set; it evaluates on the rest."""
  from torch.utils.data import DataLoader
  from datasets import DatasetSplit
  chosen = set(proxy_indices)
  rest = [i for i in range(len(data.test_set)) if i not in chosen]
  central_node.validate_set = DataLoader(DatasetSplit(data.test_set, proxy_indices),
                                         batch_size=args.validate_batchsize, shuffle=shuffle)
  central_node.local_data = DataLoader(DatasetSplit(data.test_set, rest),
                                       batch_size=args.batchsize, shuffle=True)


def train_on_whole_share(node_class, in_order):
  """With --client_valid_ratio=0 every client trains on its whole share.

  The code always builds a loader for the held-out part, which fails when that part
  is empty; the driver never evaluates on it. The shuffle stays, so the numpy random
  stream advances as in the code, unless `in_order`: then the share keeps the order
  it was given in and its loader never shuffles.
  """
  import numpy as np
  from torch.utils.data import DataLoader
  from datasets import DatasetSplit  # pylint: disable=import-error

  def split(self, idxs, train_set, valid_ratio):
    del valid_ratio
    if not in_order:
      np.random.shuffle(idxs)
    return DataLoader(DatasetSplit(train_set, idxs), batch_size=self.args.batchsize,
                      num_workers=0, shuffle=not in_order), None
  node_class.train_val_split = split


def record_orders(out_dir, clients, central_node, current_round):
  """Appends each shuffled epoch's order of the clients' and the proxy loaders to out_dir.

  The order is the sampler's own (drawn as without recording, then replayed to the
  loader); a client's is mapped to dataset indices through its share, the proxy's
  stays positions in the proxy set. Other loaders (the test set's) pass through.
  """
  from torch.utils.data import RandomSampler
  owners = {id(c.local_data.dataset): (str(k), c.local_data.dataset.idxs) for k, c in clients.items()}
  owners[id(central_node.validate_set.dataset)] = ('proxy', None)
  draw = RandomSampler.__iter__

  def recording(self):
    order = list(draw(self))
    owner = owners.get(id(self.data_source))
    if owner is not None:
      name, idxs = owner
      folder = os.path.join(out_dir, str(current_round()))
      os.makedirs(folder, exist_ok=True)
      values = order if idxs is None else [idxs[i] for i in order]
      with open(os.path.join(folder, name + '.txt'), 'a') as f:
        f.write(' '.join(str(int(v)) for v in values) + '\n')
    return iter(order)
  RandomSampler.__iter__ = recording


def replay_orders(in_dir, clients, central_node, current_round):
  """Each epoch of the clients' and the proxy loaders takes its order from in_dir.

  A client's line (dataset indices) is mapped to positions in its share; the proxy's
  is positions already. A line that is not a permutation of the loader's examples,
  or a missing one, stops the run naming the file. Other loaders (the test set's)
  shuffle as before; nothing is drawn for a replayed loader.
  """
  from torch.utils.data import RandomSampler
  owners = {}
  for k, c in clients.items():
    owners[id(c.local_data.dataset)] = (str(k), {v: i for i, v in enumerate(c.local_data.dataset.idxs)})
  proxy = central_node.validate_set.dataset
  owners[id(proxy)] = ('proxy', {i: i for i in range(len(proxy))})
  draw = RandomSampler.__iter__
  lines_read = {}

  def replaying(self):
    owner = owners.get(id(self.data_source))
    if owner is None:
      return draw(self)
    name, position = owner
    path = os.path.join(in_dir, str(current_round()), name + '.txt')
    epoch = lines_read.get(path, 0)
    try:
      with open(path) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    except OSError as e:
      sys.exit(f'--replay_order: {path}: {e.strerror}')
    if epoch >= len(lines):
      sys.exit(f'--replay_order: {path} has {len(lines)} epochs, epoch {epoch + 1} needed')
    try:
      order = [position[int(v)] for v in lines[epoch].split()]
    except (KeyError, ValueError) as e:
      sys.exit(f'--replay_order: {path}, line {epoch + 1}: {e!r} is not one of its {len(position)} examples')
    if len(order) != len(position) or len(set(order)) != len(order):
      sys.exit(f'--replay_order: {path}, line {epoch + 1}: not a permutation of its {len(position)} examples')
    lines_read[path] = epoch + 1
    return iter(order)
  RandomSampler.__iter__ = replaying


def lambda_summary(weights):
  entropy = -sum(w * math.log(w) for w in weights if w > 0)
  return entropy, max(weights)


def run(flags):
  official_cpu.import_official(flags.official)
  official_cpu.patch_cuda_to_cpu()
  # The code reads Fashion-MNIST from a fixed folder through PIL, with ToTensor() only.
  official_cpu.serve_fashion_mnist(official_cpu.mnist_family_root(flags.fmnist_dir, flags.cache))
  from datasets import Data
  from nodes import Node
  if flags.client_valid_ratio == 0:
    train_on_whole_share(Node, flags.in_order)
  from utils import setup_seed, validate, lr_scheduler
  from client_funct import Client_update
  from server_funct import (receive_client_models, fedlaw_optimization,
                            fedlaw_generate_global_model)

  args = official_args(flags)
  # One thread: float sums in one order, so a run repeats bit for bit on one machine.
  import torch
  torch.set_num_threads(1)
  setup_seed(args.random_seed)
  data = Data(args)
  if flags.inputs:
    data.train_loader = official_cpu.read_partition(
        os.path.join(flags.inputs, 'partition.json'), len(data.train_set), args.node_num)
  # As main_fedlaw.py: size weights from each client's whole share, held-out part included.
  sample_size = [len(data.train_loader[i]) for i in range(args.node_num)]
  size_weights = [s / sum(sample_size) for s in sample_size]

  central_node = Node(-1, data.test_loader[0], data.test_set, args)
  if flags.inputs:
    proxy_path = os.path.join(flags.inputs, 'proxy.json')
    if flags.in_order and not os.path.exists(proxy_path):
      sys.exit(f'--in_order: {proxy_path} is missing, and the code would draw and shuffle its own proxy set')
    if os.path.exists(proxy_path):
      replace_proxy_set(central_node, data, official_cpu.read_indices(proxy_path), args,
                        shuffle=not flags.in_order)
    initial = official_cpu.read_model_file(os.path.join(flags.inputs, 'initial_model.pt'),
                                           parameter_names(central_node.model))
    central_node.model.load_param(flatten(initial))
  clients = {i: Node(i, data.train_loader[i], data.train_set, args) for i in range(args.node_num)}

  os.makedirs(flags.out, exist_ok=True)
  if flags.export:
    export_inputs(flags.out, clients, central_node, len(data.train_set))

  round_now = [0]
  if flags.record_order:
    if os.path.exists(flags.record_order) and os.listdir(flags.record_order):
      sys.exit(f'--record_order: {flags.record_order} is not empty (orders are appended)')
    record_orders(flags.record_order, clients, central_node, lambda: round_now[0])
  if flags.replay_order:
    replay_orders(flags.replay_order, clients, central_node, lambda: round_now[0])

  with open(os.path.join(flags.out, 'trace.csv'), 'w', newline='') as f:
    trace = csv.writer(f)
    trace.writerow(['round', 'test_accuracy', 'gamma', 'lambda_entropy', 'lambda_max',
                    'train_loss', 'lr'])
    for t in range(args.T):
      round_now[0] = t + 1
      lr_scheduler(t, clients, args)
      clients, train_loss = Client_update(args, clients, central_node)
      select = list(range(len(clients)))
      agg_weights, params = receive_client_models(args, clients, select, size_weights)
      gamma, weights = fedlaw_optimization(args, agg_weights, params, central_node)
      central_node = fedlaw_generate_global_model(gamma, weights, params, central_node)
      accuracy = validate(args, central_node, which_dataset='local')
      entropy, largest = lambda_summary([float(w) for w in weights])
      trace.writerow([t + 1, f'{accuracy / 100:.6f}', f'{float(gamma):.6f}', f'{entropy:.6f}',
                      f'{largest:.6f}', f'{train_loss:.6g}', f'{args.lr:.6g}'])
      f.flush()
      print(f'round {t + 1}: accuracy {accuracy:.2f} gamma {float(gamma):.4f} '
            f'train loss {train_loss:.4g}', flush=True)


def export_inputs(out, clients, central_node, num_examples):
  """What each client trains on, the proxy set and the initial global model, as fedkit reads them."""
  official_cpu.write_partition(os.path.join(out, 'partition.json'),
                               [c.local_data.dataset.idxs for c in clients.values()], num_examples)
  official_cpu.write_indices(os.path.join(out, 'proxy.json'), central_node.validate_set.dataset.idxs)
  model = central_node.model
  official_cpu.write_model_file(os.path.join(out, 'initial_model.pt'),
                                unflatten(model.get_param(clone=True), model))


def read_rows(path):
  with open(path, newline='') as f:
    return {int(r['round']): r for r in csv.DictReader(f)}


def compare(trace_path, metrics_path):
  """Per round: accuracy, gamma and the lambdas' entropy of both runs; their mean absolute
  differences; then each run's last-10 mean. Either file may be a trace or a metrics.csv,
  so two fedkit runs compare too (a control for how far float rounding alone moves a run)."""
  official, fedkit = read_rows(trace_path), read_rows(metrics_path)
  columns = (('test_accuracy', 'acc', 100), ('gamma', 'gamma', 1), ('lambda_entropy', 'H(lambda)', 1),
             ('lambda_max', 'max lambda', 1))
  print('round ' + ' '.join(f'{label + " " + side:>20}' for _, label, _ in columns
                            for side in ('official', 'fedkit')))
  for t in sorted(official):
    mine = fedkit.get(t, {})
    cells = []
    for key, _, scale in columns:
      for row in (official[t], mine):
        cells.append(f'{float(row.get(key) or "nan") * scale:20.4f}')
    print(f'{t:5d} ' + ' '.join(cells))
  common = [t for t in sorted(official) if t in fedkit]
  if common:
    gaps = ', '.join(
        f'{label} {sum(abs(float(official[t][key]) - float(fedkit[t][key])) for t in common) * scale / len(common):.4f}'
        for key, label, scale in columns)
    print(f'mean absolute difference over rounds {common[0]}-{common[-1]}: {gaps}')
  for name, rows in (('official', official), ('fedkit', fedkit)):
    last = [float(rows[t]['test_accuracy']) for t in sorted(rows)[-10:] if rows[t].get('test_accuracy')]
    if last:
      print(f'{name}: mean test accuracy of the last 10 rounds {100 * sum(last) / len(last):.2f} '
            f'(rounds {sorted(rows)[-10]}-{sorted(rows)[-1]})')


def main():
  flags = parse_flags()
  if flags.compare:
    compare(*flags.compare)
  else:
    run(flags)


if __name__ == '__main__':
  main()
