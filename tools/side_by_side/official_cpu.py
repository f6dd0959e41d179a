"""Running an official repository's code on the CPU, and the files fedkit shares with it.

The official FL repositories this folder compares against hard-code CUDA
(`.cuda()`, `torch.cuda.set_device`, `device='cuda'` tensors). `patch_cuda_to_cpu`
redirects those calls at run time, so their code runs unchanged on a CPU-only
machine. The file helpers read and write the formats of docs/identical-inputs.md:
partition and proxy JSON files, and model.pt files (a torch.save'd dict from
parameter name to tensor).
"""

import gzip
import json
import os
import shutil
import sys
import types

import torch


def _cpu(device):
  """`device` with CUDA replaced by the CPU; anything else unchanged."""
  if isinstance(device, str) and device.startswith('cuda'):
    return 'cpu'
  if isinstance(device, torch.device) and device.type == 'cuda':
    return torch.device('cpu')
  return device


def patch_cuda_to_cpu():
  """Makes CUDA calls no-ops and CUDA tensors CPU tensors, for code that assumes a GPU:
  .cuda(), .to('cuda') on tensors and modules, device='cuda' in tensor factories,
  and torch.cuda's device and seed calls."""
  def on_cpu(function):
    def call(*args, **kwargs):
      args = tuple(_cpu(a) for a in args)
      if 'device' in kwargs:
        kwargs['device'] = _cpu(kwargs['device'])
      return function(*args, **kwargs)
    return call

  torch.Tensor.to = on_cpu(torch.Tensor.to)
  torch.nn.Module.to = on_cpu(torch.nn.Module.to)
  torch.Tensor.cuda = lambda self, *args, **kwargs: self
  torch.nn.Module.cuda = lambda self, *args, **kwargs: self
  torch.cuda.set_device = lambda *args, **kwargs: None
  torch.cuda.manual_seed = lambda *args, **kwargs: None
  torch.cuda.manual_seed_all = lambda *args, **kwargs: None
  for name in ('tensor', 'zeros', 'ones', 'empty', 'randn', 'rand', 'arange', 'full'):
    setattr(torch, name, on_cpu(getattr(torch, name)))


def stub_if_missing(name, **attributes):
  """Installs a module of `attributes` under `name` unless the real one imports.

  For imports an official script makes but the parts run here never use (a progress
  bar, a solver whose only caller is commented out).
  """
  try:
    __import__(name)
  except ImportError:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def stub_maecho_imports():
  """MA-Echo's utils.py imports tqdm (a progress bar over its iterations) and cvxopt
  (for a QP whose only call is commented out)."""
  stub_if_missing('tqdm', tqdm=lambda iterable, *args, **kwargs: iterable)
  solvers = types.SimpleNamespace(options={}, qp=None)
  stub_if_missing('cvxopt', matrix=None, solvers=solvers)
  stub_if_missing('cvxopt.solvers', options=solvers.options, qp=None)


def line_of(path, text):
  """The 1-based line of `path` whose stripped text is `text` (exactly one), for
  sys.settrace hooks on an official script's lines; fails clearly on another revision."""
  with open(path) as f:
    lines = [i + 1 for i, line in enumerate(f) if line.strip() == text]
  if len(lines) != 1:
    sys.exit(f'{path}: expected one line "{text}", found {len(lines)}: not the '
             'revision this script was written for')
  return lines[0]


def import_official(checkout):
  """Puts an official checkout first on the module path; fails clearly if it is not there."""
  if not os.path.isdir(checkout):
    sys.exit(f'--official: {checkout} is not a directory (fetch the official repository first)')
  sys.path.insert(0, os.path.abspath(checkout))


def mnist_family_root(idx_dir, cache_dir, folder='FashionMNIST'):
  """A torchvision root holding the IDX files of `idx_dir` (gzip or not) for the
  dataset class named `folder` (FashionMNIST, or MNIST).

  torchvision reads <folder>/raw/<name> uncompressed; Debian's dataset package
  ships the same files gzipped.
  """
  raw = os.path.join(cache_dir, folder, 'raw')
  os.makedirs(raw, exist_ok=True)
  for name in ('train-images-idx3-ubyte', 'train-labels-idx1-ubyte',
               't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'):
    target = os.path.join(raw, name)
    if os.path.exists(target):
      continue
    plain, packed = os.path.join(idx_dir, name), os.path.join(idx_dir, name + '.gz')
    if os.path.exists(plain):
      shutil.copyfile(plain, target)
    elif os.path.exists(packed):
      with gzip.open(packed, 'rb') as src, open(target + '.part', 'wb') as dst:
        shutil.copyfileobj(src, dst)
      os.replace(target + '.part', target)
    else:
      sys.exit(f'{idx_dir}: neither {plain} nor {packed} exists')
  return cache_dir


def serve_fashion_mnist(root, normalize=None):
  """torchvision.datasets.FashionMNIST becomes the files under `root`, converted once, as tensors.

  Official code reads Fashion-MNIST through torchvision, one PIL image at a time
  (which would take most of every round on a CPU) and with a download it cannot do
  here. The replacement converts every image once, exactly as ToTensor() converts
  one (uint8 / 255 as float32, shape [1, 28, 28]), then, with `normalize` = (mean,
  std), as fedkit's data sets do: (x / 255 - mean) / std. It ignores the root,
  download and transform it is given (the caller says what the inputs are) and
  serves (image tensor, int label) pairs with `.targets`, as torchvision does.
  """
  import torchvision
  real = torchvision.datasets.FashionMNIST

  class PreconvertedFashionMnist(torch.utils.data.Dataset):
    def __init__(self, train, **unused):
      del unused
      source = real(root, train=train, download=False)
      self.targets = source.targets
      self.images = source.data.unsqueeze(1).float().div(255)
      if normalize is not None:
        mean, std = normalize
        self.images = self.images.sub(mean).div(std)

    def __len__(self):
      return len(self.targets)

    def __getitem__(self, index):
      return self.images[index], int(self.targets[index])

  torchvision.datasets.FashionMNIST = lambda *_, **kwargs: PreconvertedFashionMnist(**{
      k: v for k, v in kwargs.items() if k != 'root'})


def read_partition(path, num_examples, num_clients):
  """Client -> example indices from a partition file, checked as fedkit checks it."""
  with open(path) as f:
    content = json.load(f)
  if content.get('num_examples') != num_examples:
    sys.exit(f'{path}: num_examples is {content.get("num_examples")}, the training set has {num_examples}')
  clients = [list(map(int, c.get('indices', []))) for c in content.get('clients', [])]
  if len(clients) != num_clients:
    sys.exit(f'{path}: {len(clients)} clients, the run has {num_clients}')
  seen = set()
  for k, indices in enumerate(clients):
    if not indices:
      sys.exit(f'{path}: client {k} has no examples')
    for i in indices:
      if not 0 <= i < num_examples or i in seen:
        sys.exit(f'{path}: client {k}: index {i} is out of range or owned twice')
      seen.add(i)
  return clients


def write_partition(path, clients, num_examples):
  with open(path, 'w') as f:
    json.dump({'num_examples': num_examples,
               'clients': [{'indices': [int(i) for i in c]} for c in clients]}, f)


def read_indices(path):
  with open(path) as f:
    return [int(i) for i in json.load(f)['indices']]


def write_indices(path, indices):
  with open(path, 'w') as f:
    json.dump({'indices': [int(i) for i in indices]}, f)


def read_model_file(path, names):
  """The tensors of a fedkit model.pt in the order of `names`; fails on missing or extra names."""
  state = torch.load(path, map_location='cpu')
  missing, extra = set(names) - set(state), set(state) - set(names)
  if missing or extra:
    sys.exit(f'{path}: missing {sorted(missing)}, unexpected {sorted(extra)}')
  return [state[n] for n in names]


def write_model_file(path, named_tensors):
  torch.save({n: t.detach().clone().contiguous() for n, t in named_tensors}, path)
