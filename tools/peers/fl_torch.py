"""What the Python peers share: fedkit's data and split, the model, local SGD,
evaluation and FedAvg's average, written as a PyTorch user writes them.

Both peers (the plain loop and the Flower app) train with these functions, so
that what differs between them is the framework around the training, not it.
"""

import gzip
import json
import os
import struct

import torch

# fedkit's normalisation of Fashion-MNIST (data/normalization.h).
FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530


def read_idx(path):
  """The array of an IDX file (gzip or not) as a uint8 tensor of its shape."""
  opener = gzip.open if path.endswith('.gz') else open
  with opener(path, 'rb') as f:
    data = f.read()
  zero, dtype, dims = struct.unpack('>HBB', data[:4])
  if zero != 0 or dtype != 0x08:
    raise ValueError(f'{path}: not an IDX file of unsigned bytes')
  shape = struct.unpack(f'>{dims}I', data[4:4 + 4 * dims])
  return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def idx_path(directory, base):
  for name in (base + '.gz', base):
    path = os.path.join(directory, name)
    if os.path.exists(path):
      return path
  raise FileNotFoundError(f'{directory}: neither {base}.gz nor {base}')


def load_split(directory, train):
  """Images as float32 [N, 1, 28, 28] normalised as fedkit does, labels as int64."""
  prefix = 'train' if train else 't10k'
  images = read_idx(idx_path(directory, f'{prefix}-images-idx3-ubyte'))
  labels = read_idx(idx_path(directory, f'{prefix}-labels-idx1-ubyte'))
  x = images.unsqueeze(1).float().div(255).sub(FASHION_MNIST_MEAN).div(FASHION_MNIST_STD)
  return x, labels.long()


def read_partition(path, num_examples):
  """Each client's example indices from a fedkit partition.json."""
  with open(path) as f:
    content = json.load(f)
  if content.get('num_examples') != num_examples:
    raise ValueError(f'{path}: num_examples is {content.get("num_examples")}, '
                     f'the training set has {num_examples}')
  return [torch.tensor([int(i) for i in c['indices']], dtype=torch.long)
          for c in content['clients']]


def mlp(hidden, in_features=784, classes=10):
  """fedkit's `mlp` model: Linear and ReLU layers, then the classifier."""
  layers = [torch.nn.Flatten()]
  width = in_features
  for h in hidden:
    layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
    width = h
  layers.append(torch.nn.Linear(width, classes))
  return torch.nn.Sequential(*layers)


def train_locally(model, x, y, epochs, batch_size, lr, generator):
  """Local SGD over (x, y), reshuffled each epoch; returns the mean training loss."""
  optimizer = torch.optim.SGD(model.parameters(), lr=lr)
  loss_fn = torch.nn.CrossEntropyLoss()
  model.train()
  total, steps = 0.0, 0
  for _ in range(epochs):
    order = torch.randperm(len(y), generator=generator)
    for begin in range(0, len(y), batch_size):
      rows = order[begin:begin + batch_size]
      optimizer.zero_grad()
      loss = loss_fn(model(x[rows]), y[rows])
      loss.backward()
      optimizer.step()
      total += loss.item()
      steps += 1
  return total / max(steps, 1)


@torch.no_grad()
def evaluate(model, x, y, batch_size=1000):
  """Accuracy over (x, y)."""
  model.eval()
  correct = 0
  for begin in range(0, len(y), batch_size):
    correct += int((model(x[begin:begin + batch_size]).argmax(1) == y[begin:begin + batch_size]).sum())
  return correct / len(y)


def weighted_average(states, weights):
  """FedAvg's new global model: the states averaged with the given weights."""
  total = float(sum(weights))
  return {name: sum(state[name] * (w / total) for state, w in zip(states, weights))
          for name in states[0]}
