#!/usr/bin/python3
"""The official MA-Echo code on the CPU, on its own split or on fedkit's, with its
per-iteration accuracy.

Drives the functions of FudanVI/MAEcho (a checkout you fetched; nothing of it is in
this repository) as its noniid.py does for MNIST and its MLP: the Dirichlet split
(utils.partition), each client's own or a shared initialisation (--diff_init), local
training (trainmodel.Appr), the split average and the logit ensemble, the
projection matrices (utils.createp) and the aggregation (utils.noniid_aggr with
--test, which evaluates the clients' mean after every iteration). OT fusion is left
out: it needs the POT package and is not what is compared.

  # The official pipeline on its own split, exporting it in fedkit's format:
  tools/side_by_side/maecho.py --official=$HOME/MAEcho --seed=1 --alpha=0.5 \
      --clients=5 --out=/tmp/maecho_official --export
  # The official pipeline on a fedkit run's partition.json (output.write_inputs):
  tools/side_by_side/maecho.py --official=... --clients=5 --out=/tmp/x --inputs=/tmp/fedkit_run
  # Both per-iteration traces (fedkit's with trace_every: 1 trace_accuracy: true):
  tools/side_by_side/maecho.py --compare /tmp/x/trace.csv /tmp/fedkit_run/metrics.csv

Data: the MNIST IDX files fedkit reads (--mnist_dir; by default the folder fedkit's
mnist dataset uses, which holds tools/setup.sh's 10,000-digit subset unless the
official 70,000 were put there), so indices in a partition file mean the same
images on both sides. Output: <out>/trace.csv (iteration, accuracy of the clients'
mean after that many iterations, then each client iterate's accuracy),
<out>/summary.csv (each client model's own accuracy, split average, ensemble,
MA-Echo), and with --export <out>/partition.json (and, with --same_init,
initial_model.pt). Needs Debian's python3-torch
(tools/side_by_side/setup.sh).
"""

import argparse
import copy
import csv
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official_cpu  # pylint: disable=wrong-import-position


def default_mnist_dir():
  root = os.environ.get('FEDKIT_DATA_DIR') or os.path.join(os.path.expanduser('~'), '.cache', 'fedkit')
  return os.path.join(root, 'mnist')


def parse_flags():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--official', help='checkout of FudanVI/MAEcho')
  p.add_argument('--out', help='folder for trace.csv, summary.csv and the exported split')
  p.add_argument('--seed', type=int, default=1, help="the code's --seed")
  p.add_argument('--alpha', type=float, default=0.01, help="the code's --alpha (Dirichlet beta)")
  p.add_argument('--clients', type=int, default=5, help="the code's --n_nets")
  p.add_argument('--same_init', action='store_true',
                 help="every client starts from one initialisation (the code's --diff_init False)")
  p.add_argument('--iterations', type=int, default=60, help="the code's --maxt_times")
  p.add_argument('--step', type=float, default=1.6, help="the code's --lambdastep")
  p.add_argument('--shrink', type=float, default=0.5, help="the code's --C (projector shrink)")
  p.add_argument('--epochs', type=int, default=10, help="the code's --num_epochs")
  p.add_argument('--inputs', help="folder with a fedkit run's partition.json (output.write_inputs), "
                 "used instead of the code's own Dirichlet split, and with --same_init its "
                 'initial_model.pt when there is one')
  p.add_argument('--export', action='store_true',
                 help="write the code's split as partition.json (and with --same_init the shared "
                 'initialisation as initial_model.pt)')
  p.add_argument('--mnist_dir', default=default_mnist_dir(), help='MNIST IDX files, gzipped or not')
  p.add_argument('--cache', default='/tmp/fedkit-side-by-side', help='scratch folder')
  p.add_argument('--compare', nargs=2, metavar=('TRACE_CSV', 'FEDKIT_METRICS_CSV'),
                 help='print an official trace beside a fedkit metrics.csv and exit')
  flags = p.parse_args()
  if not flags.compare and not (flags.official and flags.out):
    p.error('--official and --out are required (or --compare)')
  return flags


def mnist(directory, cache):
  """Train and test sets shaped as the code's torchvision MNIST (data, targets), plus
  the test set as normalised tensors (what its test transform yields)."""
  import torch
  import torchvision
  root = official_cpu.mnist_family_root(directory, cache, folder='MNIST')
  train = torchvision.datasets.MNIST(root, train=True, download=False)
  test = torchvision.datasets.MNIST(root, train=False, download=False)
  return train, torch.utils.data.TensorDataset(normalise(test.data), test.targets)


def normalise(images):
  """torchvision's ToTensor then Normalize((0.1307,), (0.3081,)), as noniid.py's transform."""
  return ((images.float() / 255.0 - 0.1307) / 0.3081).unsqueeze(1)


# The code's mnistnet parameters under fedkit's names (model "mlp", bias: false).
FEDKIT_NAMES = {'fc1.weight': 'layers.0.weight', 'fc2.weight': 'layers.2.weight',
                'fc3.weight': 'layers.4.weight', 'fc4.weight': 'layers.6.weight'}


class Truncated:
  """The code's MNIST_truncated (a client's images through its transform) with the
  transform applied once up front: same tensors, same batches, without PIL per image."""

  def __init__(self, train, indices):
    import torch
    index = torch.tensor(indices, dtype=torch.long)
    self.x = normalise(train.data[index])
    self.y = train.targets[index]

  def __getitem__(self, i):
    return self.x[i], self.y[i]

  def __len__(self):
    return len(self.y)


def run(flags):
  import numpy as np
  import torch
  official_cpu.import_official(flags.official)
  official_cpu.patch_cuda_to_cpu()
  official_cpu.stub_maecho_imports()
  import modelset
  import trainmodel
  import utils

  # One thread: float sums in one order, so a run repeats bit for bit on one machine.
  torch.set_num_threads(1)
  # noniid.py's seeding, after its imports (which seed too).
  import random
  torch.manual_seed(flags.seed)
  np.random.seed(flags.seed)
  random.seed(flags.seed)
  args = types.SimpleNamespace(
      alpha=flags.alpha, model_type='mlpnet', data='mnist', n_nets=flags.clients,
      diff_init=not flags.same_init, maxt_times=flags.iterations, C=flags.shrink, norm=False,
      test=True, gpu_id=0, seed=flags.seed, lambdastep=flags.step, split=True,
      batch_size=64, learning_rate=0.01, num_epochs=flags.epochs)

  train, test = mnist(flags.mnist_dir, flags.cache)
  labels = train.targets.numpy()
  if flags.inputs:
    clients = official_cpu.read_partition(os.path.join(flags.inputs, 'partition.json'),
                                          len(labels), flags.clients)
  else:
    index_map, _ = utils.partition(args.alpha, args.n_nets, labels)
    clients = [index_map[i] for i in range(args.n_nets)]
  # noniid.py: a class counts as a client's when it holds more than one example of it.
  splits = []
  for indices in clients:
    counts = np.bincount(labels[indices], minlength=10)
    splits.append([c for c in range(10) if counts[c] > 1])
  loaders = [torch.utils.data.DataLoader(Truncated(train, c), batch_size=args.batch_size, shuffle=True)
             for c in clients]
  test_loader = torch.utils.data.DataLoader(test, batch_size=args.batch_size, shuffle=False)

  if args.diff_init:
    models = [modelset.mnistnet() for _ in range(args.n_nets)]
  else:
    models = [modelset.mnistnet()]
    initial = os.path.join(flags.inputs, 'initial_model.pt') if flags.inputs else ''
    if initial and os.path.exists(initial):
      names = list(FEDKIT_NAMES)
      tensors = official_cpu.read_model_file(initial, [FEDKIT_NAMES[n] for n in names])
      models[0].load_state_dict(dict(zip(names, tensors)))
    if flags.export:
      os.makedirs(flags.out, exist_ok=True)
      official_cpu.write_model_file(os.path.join(flags.out, 'initial_model.pt'),
                                    [(FEDKIT_NAMES[n], t) for n, t in models[0].state_dict().items()])
    models += [copy.deepcopy(models[0]) for _ in range(1, args.n_nets)]
  client_accuracy = []
  for model, loader in zip(models, loaders):
    trainmodel.Appr(model, args=args).train(loader)
    client_accuracy.append(utils.valid(model, test_loader, args))
  ensemble = utils.noniid_ensemble(models, test_loader, splits, args)
  split_average = utils.valid(utils.noniid_avgmodel_o(models, splits, args.split), test_loader, args)
  projections = [utils.createp(model, loader, args=args) for model, loader in zip(models, loaders)]
  # Rows: before iteration 0, 1, ..., maxt_times - 1, then after the last; each row is
  # [client iterate accuracies..., clients' mean accuracy].
  trace = utils.noniid_aggr(models, projections, test_loader, splits=splits, args=args)

  os.makedirs(flags.out, exist_ok=True)
  with open(os.path.join(flags.out, 'trace.csv'), 'w', newline='') as f:
    out = csv.writer(f)
    out.writerow(['iteration', 'test_accuracy'] + [f'client_{k}' for k in range(args.n_nets)])
    for iteration, row in enumerate(trace):
      out.writerow([iteration, f'{row[-1] / 100:.6f}'] + [f'{a / 100:.6f}' for a in row[:-1]])
  with open(os.path.join(flags.out, 'summary.csv'), 'w', newline='') as f:
    out = csv.writer(f)
    out.writerow(['label', 'test_accuracy'])
    for k, a in enumerate(client_accuracy):
      out.writerow([f'client {k}', f'{a / 100:.6f}'])
    out.writerow(['clients, mean', f'{np.mean(client_accuracy) / 100:.6f}'])
    out.writerow(['split average', f'{split_average / 100:.6f}'])
    out.writerow(['logit ensemble', f'{ensemble / 100:.6f}'])
    out.writerow(['maecho', f'{trace[-1][-1] / 100:.6f}'])
  if flags.export:
    official_cpu.write_partition(os.path.join(flags.out, 'partition.json'), clients, len(labels))
  print(f'clients {" ".join(f"{a:.2f}" for a in client_accuracy)} (mean {np.mean(client_accuracy):.2f}); '
        f'split average {split_average:.2f}; ensemble {ensemble:.2f}; MA-Echo {trace[-1][-1]:.2f} %')


def compare(trace_path, metrics_path):
  """The official clients' mean after each iteration beside fedkit's accuracy_iter_NNN."""
  with open(trace_path) as f:
    official = {int(r['iteration']): float(r['test_accuracy']) for r in csv.DictReader(f)}
  with open(metrics_path) as f:
    rows = list(csv.DictReader(f))
  if not rows:
    sys.exit(f'{metrics_path}: no rows')
  fedkit = {int(k[len('accuracy_iter_'):]): float(v) for k, v in rows[-1].items()
            if k.startswith('accuracy_iter_') and v not in ('', None)}
  if not fedkit:
    sys.exit(f'{metrics_path}: no accuracy_iter_NNN columns (run MA-Echo with '
             'trace_every: 1 trace_accuracy: true)')
  print('iteration  official  fedkit  (test accuracy %, the clients\' mean after that many iterations)')
  for iteration in sorted(set(official) | set(fedkit)):
    a = f'{100 * official[iteration]:8.2f}' if iteration in official else '       -'
    b = f'{100 * fedkit[iteration]:7.2f}' if iteration in fedkit else '      -'
    print(f'{iteration:9d} {a} {b}')


def main():
  flags = parse_flags()
  if flags.compare:
    compare(*flags.compare)
  else:
    run(flags)


if __name__ == '__main__':
  main()
