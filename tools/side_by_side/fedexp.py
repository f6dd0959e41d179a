#!/usr/bin/python3
"""The official FedExP code on the CPU, on Fashion-MNIST, on its own inputs or on fedkit's,
with a per-round trace.

Runs main.py of Divyansh03/FedExP (a checkout you fetched; nothing of it is in this
repository) unchanged with runpy, as `main.py --algorithm fedexp --dataset EMNIST`
with 100 clients, 20 per round and Dirichlet alpha 0.3: the EMNIST branch holds the
constants experiments/fedexp/fmnist.textproto copies (local lr 0.1 decayed by 0.998
before every round, 20 local SGD steps of batch 50, weight decay 1e-4, clipping at
10, epsilon 0.1 decayed by 0.998^2 per round). What it computes each round is read
out of its own stack frames with sys.settrace, without changing a line of it.

Only what cannot run here is replaced, at run time:
- CUDA calls run on the CPU (official_cpu.patch_cuda_to_cpu).
- The data: the EMNIST branch loads a preprocessed file that is not in the
  repository, and the code's own Fashion-MNIST branch does not run (it names an
  undefined transform). get_dataset is called with 'FashionMNIST' and 10 classes in
  place of ('EMNIST', 62), the missing transform name is defined, and torchvision's
  FashionMNIST serves the IDX files of --fmnist_dir (no download), normalised as
  fedkit normalises them, (x / 255 - 0.2860) / 0.3530, so that both sides see the
  same inputs (the code's branch would normalise with mean 0.5, std 0.5). Its split,
  getDirichletData_equal, and the rest of get_dataset run unchanged.
- The model: the code has no MLP. get_model returns an MLP 784-200-200-10 (Linear,
  ReLU, Linear, ReLU, Linear on the flattened image) whose parameters have the
  names and shapes of fedkit's model "mlp" with hidden [200, 200]: layers.0.weight,
  layers.0.bias, layers.2.*, layers.4.*.
- With --epsilon, FedExP's eps_0 is set in main.py's globals once its constants are
  defined (the code's CIFAR/CINIC value 0.001 in place of EMNIST's 0.1, say).
- With --inputs, a fedkit run's partition.json replaces what getDirichletData_equal
  returns (it still runs, so the random streams advance as in the code) and its
  initial_model.pt replaces the weights of the freshly built model.

main.py runs rounds t = 0..num_rounds and evaluates every 5th; --rounds=R runs R
rounds (num_rounds R - 1) and the script evaluates the model the code would
evaluate (the mean of the last two iterates) after every round with the code's
test_img, restoring torch's random state afterwards so the run's random streams
are the code's; in the code's own evaluation rounds the two results are checked
to be equal. One torch thread: a rerun repeats the trace bit for bit.

  # The official run on its own split, exporting that split and initial model in
  # fedkit's formats (docs/identical-inputs.md):
  tools/side_by_side/fedexp.py --official=$HOME/FedExP --seed=1 --out=/tmp/x --export
  # The official code on a fedkit run's inputs (its output.write_inputs files):
  tools/side_by_side/fedexp.py --official=$HOME/FedExP --seed=1 --out=/tmp/y --inputs=/tmp/run
  # Both traces side by side:
  tools/side_by_side/fedexp.py --compare /tmp/x/trace.csv /tmp/fedkit_run/metrics.csv

Output: <out>/trace.csv, one row per round (1-based) with fedkit's column names:
test_accuracy, test_loss, train_loss (the participants' mean loss over their local
steps, weighted by their sizes, as fedkit's train_loss), eta_g, fedexp_epsilon
(eps_t), fedexp_mean_sq_norm (the weighted mean of ||Delta_i||^2),
fedexp_mean_update_sq_norm (||Delta_bar||^2), lr (the local rate) and the sampled
clients; with --export, <out>/partition.json and initial_model.pt. Needs Debian's
python3-torch and python3-torchvision (tools/side_by_side/setup.sh).
"""

import argparse
import csv
import os
import runpy
import sys
import tempfile

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import official_cpu  # pylint: disable=wrong-import-position

# fedkit's Fashion-MNIST normalisation (data/normalization.h).
FASHION_MNIST_MEAN_STD = (0.2860, 0.3530)
TRAIN_EXAMPLES = 60000
CLASSES = 10


class FedkitMlp(nn.Module):
  """fedkit's model "mlp" with hidden [200, 200] on 28x28 images and 10 classes."""

  def __init__(self):
    super().__init__()
    self.layers = nn.Sequential(nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(),
                                nn.Linear(200, CLASSES))

  def forward(self, x):
    return self.layers(x.flatten(1))


def parse_flags():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--official', help='checkout of Divyansh03/FedExP')
  p.add_argument('--out', help='folder for trace.csv and exported inputs')
  p.add_argument('--seed', type=int, default=1, help="the code's --seed")
  p.add_argument('--rounds', type=int, default=100, help='rounds to run (the code\'s --num_rounds + 1)')
  p.add_argument('--clients', type=int, default=100, help="the code's --num_clients")
  p.add_argument('--participants', type=int, default=20, help="the code's --num_participating_clients")
  p.add_argument('--alpha', type=float, default=0.3, help="the code's --alpha")
  p.add_argument('--epsilon', type=float,
                 help="FedExP's eps_0 in place of the code's EMNIST value 0.1 (e.g. 0.001, its "
                 'CIFAR/CINIC value, under which this MLP extrapolates)')
  p.add_argument('--inputs', help="folder with a fedkit run's partition.json and initial_model.pt "
                 '(output.write_inputs); each replaces what the code would draw')
  p.add_argument('--export', action='store_true',
                 help="write the code's own split and initial model in fedkit's formats")
  p.add_argument('--fmnist_dir', default='/usr/share/datasets/fashion-mnist',
                 help='Fashion-MNIST IDX files, gzipped or not')
  p.add_argument('--cache', default='/tmp/fedkit-side-by-side', help='scratch folder')
  p.add_argument('--compare', nargs=2, metavar=('TRACE_CSV', 'FEDKIT_METRICS_CSV'),
                 help='print an official trace beside a fedkit metrics.csv and exit')
  flags = p.parse_args()
  if not flags.compare and not (flags.official and flags.out):
    p.error('--official and --out are required (or --compare)')
  if not flags.compare and flags.rounds < 1:
    p.error('--rounds must be >= 1')
  return flags


def install_replacements(flags, out):
  """Data set, split (with --inputs) and model constructor, as the module docstring says."""
  import util_data
  import util_models

  official_cpu.serve_fashion_mnist(official_cpu.mnist_family_root(flags.fmnist_dir, flags.cache),
                                   normalize=FASHION_MNIST_MEAN_STD)
  # The Fashion-MNIST branch passes `trans_fashionmist` (sic) for the training set;
  # the data set above ignores transforms, so any value does.
  util_data.trans_fashionmist = None

  split = util_data.getDirichletData_equal
  file_clients = None
  if flags.inputs:
    file_clients = official_cpu.read_partition(os.path.join(flags.inputs, 'partition.json'),
                                               TRAIN_EXAMPLES, flags.clients)

  def dirichlet_equal(y, n, alpha, num_c):
    clients = split(y, n, alpha, num_c)
    if file_clients is not None:
      clients = file_clients
    if flags.export:
      official_cpu.write_partition(os.path.join(out, 'partition.json'), clients, len(y))
    return clients

  util_data.getDirichletData_equal = dirichlet_equal
  get_dataset = util_data.get_dataset
  util_data.get_dataset = lambda datatype, n_client, n_c, alpha, partition_equal=True: get_dataset(
      'FashionMNIST', n_client, CLASSES, alpha, partition_equal)

  def get_model(model, n_c):
    del model, n_c
    net = FedkitMlp()  # built as the code builds its models: from torch's seeded stream
    names = [n for n, _ in net.named_parameters()]
    if flags.inputs:
      tensors = official_cpu.read_model_file(os.path.join(flags.inputs, 'initial_model.pt'), names)
      with torch.no_grad():
        for p, t in zip(net.parameters(), tensors):
          p.copy_(t)
    if flags.export:
      official_cpu.write_model_file(os.path.join(out, 'initial_model.pt'), net.named_parameters())
    return net

  util_models.get_model = get_model


def run(flags):
  official = os.path.abspath(flags.official)
  official_cpu.import_official(official)
  main = os.path.join(official, 'main.py')
  if not os.path.exists(main):
    sys.exit(f'--official: {main} does not exist')
  official_cpu.patch_cuda_to_cpu()
  # One thread: float sums in one order, so a run repeats bit for bit on one machine.
  torch.set_num_threads(1)
  out = os.path.abspath(flags.out)
  os.makedirs(out, exist_ok=True)
  install_replacements(flags, out)
  import util_general

  settings_line = official_cpu.line_of(main, 'n = len(dataset_train)')
  step_line = official_cpu.line_of(main, 'eta_g_tmp.append(eta_g)')
  eval_line = official_cpu.line_of(main, 'if(t%print_every_test==0):')
  code_eval_line = official_cpu.line_of(main, 'test_loss_algo_tmp.append(sum_loss_test)')
  local_code = util_general.LocalUpdate.train_and_sketch.__code__
  test_img = util_general.test_img

  trace_file = open(os.path.join(out, 'trace.csv'), 'w', newline='')
  trace = csv.writer(trace_file)
  columns = ['round', 'test_accuracy', 'test_loss', 'train_loss', 'eta_g', 'fedexp_epsilon',
             'fedexp_mean_sq_norm', 'fedexp_mean_update_sq_norm', 'lr', 'sampled']
  trace.writerow(columns)
  local_losses = []  # this round's participants' mean local losses, in sampling order
  row = {}

  def main_trace(frame, event, arg):
    del arg
    if event != 'line':
      return main_trace
    g = frame.f_globals
    if frame.f_lineno == settings_line and flags.epsilon is not None:
      # The constants are set; the loop has not read them yet.
      g['epsilon_fedexp'] = g['epsilon_algs']['fedexp'] = flags.epsilon
    elif frame.f_lineno == step_line:
      # The round's server step, as the code computed it.
      p, ind = g['p'], [int(i) for i in g['ind']]
      assert len(local_losses) == len(ind), (len(local_losses), len(ind))
      weights = [float(p[i]) for i in ind]
      row.clear()
      row.update({
          'round': int(g['t']) + 1,
          'train_loss': sum(w * l for w, l in zip(weights, local_losses)) / sum(weights),
          'eta_g': float(g['eta_g']),
          'fedexp_epsilon': float(g['epsilon']),
          'fedexp_mean_sq_norm': float(g['grad_norm_avg']),
          'fedexp_mean_update_sq_norm': float(g['grad_avg_norm']),
          'lr': float(g['local_lr']),
          'sampled': ' '.join(str(i) for i in ind),
      })
      local_losses.clear()
    elif frame.f_lineno == eval_line:
      # The model the code evaluates this round (net_eval), evaluated as it does;
      # test_img draws from torch's stream (its DataLoader), which is put back.
      state = torch.get_rng_state()
      accuracy, loss = test_img(g['net_eval'], g['dataset_test_global'], g['args'])
      torch.set_rng_state(state)
      row['test_accuracy'], row['test_loss'] = round(float(accuracy) / 100, 6), float(loss)
      trace.writerow([f'{row[c]:.8g}' if isinstance(row[c], float) else row[c] for c in columns])
      trace_file.flush()
      print(f'round {row["round"]}: accuracy {100 * row["test_accuracy"]:.2f} eta_g '
            f'{row["eta_g"]:.4f} train loss {row["train_loss"]:.4f}', flush=True)
    elif frame.f_lineno == code_eval_line:
      # The code's own evaluation (every 5th round) must be what was recorded.
      if (round(float(g['sum_acc_test']) / 100, 6), float(g['sum_loss_test'])) != (
          row['test_accuracy'], row['test_loss']):
        sys.exit(f'round {row["round"]}: the code evaluated {g["sum_acc_test"]} / '
                 f'{g["sum_loss_test"]}, the trace {row["test_accuracy"]} / {row["test_loss"]}')
    return main_trace

  def local_trace(frame, event, arg):
    del arg
    if event == 'return':
      losses = frame.f_locals['batch_loss']
      local_losses.append(sum(losses) / len(losses))
    return local_trace

  def global_trace(frame, event, arg):
    del event, arg
    code = frame.f_code
    if code is local_code:
      return local_trace
    if code.co_filename == main and code.co_name == '<module>':
      return main_trace
    return None

  argv, cwd = sys.argv, os.getcwd()
  with tempfile.TemporaryDirectory() as scratch:  # main.py writes its results into the cwd
    os.chdir(scratch)
    sys.argv = ['main.py', '--seed', str(flags.seed), '--algorithm', 'fedexp', '--dataset', 'EMNIST',
                '--model', 'mlp', '--num_clients', str(flags.clients),
                '--num_participating_clients', str(flags.participants),
                '--num_rounds', str(flags.rounds - 1), '--alpha', str(flags.alpha)]
    sys.settrace(global_trace)
    try:
      # Another run_name than __main__ keeps FedkitMlp picklable (main.py saves the model).
      runpy.run_path(main, run_name='fedexp_main')
    finally:
      sys.settrace(None)
      sys.argv = argv
      os.chdir(cwd)
      trace_file.close()


def read_rows(path):
  with open(path, newline='') as f:
    return {int(r['round']): r for r in csv.DictReader(f)}


def fedkit_rows(metrics_path):
  """metrics.csv's rows, with diagnostics.csv's columns for rounds metrics.csv lacks them."""
  rows = read_rows(metrics_path)
  diagnostics = os.path.join(os.path.dirname(metrics_path), 'diagnostics.csv')
  if os.path.exists(diagnostics):
    for t, extra in read_rows(diagnostics).items():
      row = rows.setdefault(t, {})
      for key, value in extra.items():
        if not row.get(key):
          row[key] = value
  return rows


def value(row, key):
  text = (row or {}).get(key)
  return float(text) if text not in (None, '') else float('nan')


def add_unclipped_step(rows):
  """eta_g before max(1, .): A / (2 (||Delta_bar||^2 + M eps_t)), the code's form, from each
  side's own numbers (M = the round's clients; fedkit's `clients`, the trace's `sampled`)."""
  for row in rows.values():
    if row.get('sampled'):
      m = len(row['sampled'].split())
    else:
      m = value(row, 'clients')
    denominator = 2 * (value(row, 'fedexp_mean_update_sq_norm') + m * value(row, 'fedexp_epsilon'))
    row['unclipped_eta_g'] = repr(value(row, 'fedexp_mean_sq_norm') / denominator)


def summary(name, rows, key, scale=1.0):
  values = [scale * value(rows[t], key) for t in sorted(rows) if (rows[t] or {}).get(key)]
  if not values:
    return f'{name}: no {key}'
  return (f'{name:8s} {key}: mean {sum(values) / len(values):.4f} min {min(values):.4f} '
          f'max {max(values):.4f} over {len(values)} rounds')


def compare(trace_path, metrics_path):
  """Per round: accuracy, eta_g (and its value before max(1, .)), training loss and the
  step's two norms of both runs; then summaries."""
  official, fedkit = read_rows(trace_path), fedkit_rows(metrics_path)
  add_unclipped_step(official)
  add_unclipped_step(fedkit)
  columns = (('test_accuracy', 'acc%', 100), ('eta_g', 'eta_g', 1),
             ('unclipped_eta_g', 'raw_eta', 1), ('train_loss', 'loss', 1),
             ('fedexp_mean_sq_norm', 'A', 1), ('fedexp_mean_update_sq_norm', 'Dbar2', 1))
  print('off = the official FedExP code, fk = fedkit; each samples its own clients. acc% test '
        'accuracy, raw_eta eta_g before max(1, .), loss the participants\' mean local training '
        'loss, A the weighted mean of ||Delta_i||^2, Dbar2 ||Delta_bar||^2')
  print('round' + ''.join(f'{label + "/" + side:>13}' for _, label, _ in columns
                          for side in ('off', 'fk')))
  for t in sorted(official):
    cells = []
    for key, _, scale in columns:
      for row in (official[t], fedkit.get(t)):
        cells.append(f'{scale * value(row, key):13.4f}')
    print(f'{t:5d}' + ''.join(cells))
  rounds = sorted(set(official) & set(fedkit))
  if not rounds:
    sys.exit('no round in common')
  both = {'official': {t: official[t] for t in rounds}, 'fedkit': {t: fedkit[t] for t in rounds}}
  print(f'\nover rounds {rounds[0]}-{rounds[-1]}:')
  eps = [abs(value(fedkit[t], 'fedexp_epsilon') / value(official[t], 'fedexp_epsilon') - 1)
         for t in rounds]
  print(f'eps_t: largest relative difference between the sides {max(eps):.2g} (fedkit prints 6 digits)')
  for key, scale in (('eta_g', 1), ('unclipped_eta_g', 1), ('test_accuracy', 100),
                     ('test_loss', 1), ('train_loss', 1),
                     ('fedexp_mean_sq_norm', 1), ('fedexp_mean_update_sq_norm', 1)):
    for name, rows in both.items():
      print(summary(name, rows, key, scale))
  later = rounds[10:]
  if len(later) >= 2:
    # Round-to-round scatter, for judging whether a gap between the sides is more than
    # the two runs' different client draws (rounds taken as independent: a rough guide).
    print(f'rounds {later[0]}-{later[-1]}: mean +- standard error of the mean')
    for key, scale in (('unclipped_eta_g', 1), ('test_accuracy', 100), ('train_loss', 1),
                       ('fedexp_mean_sq_norm', 1), ('fedexp_mean_update_sq_norm', 1)):
      cells = []
      for name, rows in both.items():
        values = [scale * value(rows[t], key) for t in later]
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
        cells.append(f'{name} {mean:.4f} +- {(var / len(values)) ** 0.5:.4f}')
      print(f'  {key}: ' + ', '.join(cells))
  for name, rows in both.items():
    above = sum(1 for t in rounds if value(rows[t], 'eta_g') > 1)
    print(f'{name:8s} rounds with eta_g > 1: {above} of {len(rounds)}')
  marks = [t for t in (10, 25, 50, 100) if t in rounds] + (
      [rounds[-1]] if rounds[-1] not in (10, 25, 50, 100) else [])
  for name, rows in both.items():
    cells = ', '.join(f'round {t} {100 * value(rows[t], "test_accuracy"):.2f}' for t in marks)
    last = [value(rows[t], 'test_accuracy') for t in rounds[-10:]]
    print(f'{name:8s} test accuracy: {cells}; mean of the last {len(last)} rounds '
          f'{100 * sum(last) / len(last):.2f}')


def main():
  flags = parse_flags()
  if flags.compare:
    compare(*flags.compare)
  else:
    run(flags)


if __name__ == '__main__':
  main()
