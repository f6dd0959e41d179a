"""The peer every user has: the same models trained by plain PyTorch eager, in the
machine's own Python, on the same device, timed the way fedkit's local_step_benchmark
and run_experiment are (tools/device_build/gpu_check.sh runs both in one call).

  python eager_peer.py --device=cuda --out=peer.json [--rounds=5] [--quick]

Measures, for each case:
  step    seconds per optimiser step over one local epoch of 3,200 random examples
          (local_step_benchmark's step/<case>: batch gathering, zero_grad, forward,
          loss, backward and the optimiser step, synchronised at the end);
  round   seconds per FedAvg round of 10 clients, each loading the global weights
          and training `epochs` local epochs over its share of the examples, then the
          size-weighted average (run_experiment's quickstart shape);
  memory  torch.cuda.max_memory_allocated over the case (CUDA only).
The architectures are fedkit's: models/mlp (784-200-200-10) and models/lenet5
(conv 5x5 16 and 32 maps, padding 2, ReLU, max-pool 2, linear).
"""

import argparse
import json
import statistics
import time

import torch
from torch import nn


def mlp():
  return nn.Sequential(nn.Flatten(), nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(),
                       nn.Linear(200, 10))


class LeNet5(nn.Module):

  def __init__(self):
    super().__init__()
    self.conv1 = nn.Conv2d(3, 16, 5, padding=2)
    self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
    self.out = nn.Linear(32 * 8 * 8, 10)

  def forward(self, x):
    h = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
    h = torch.max_pool2d(torch.relu(self.conv2(h)), 2)
    return self.out(h.flatten(1))


# name: (model, input shape, batch, optimiser, client epochs, examples per client)
CASES = {
    'quickstart_mlp': (mlp, (1, 28, 28), 50, lambda p: torch.optim.SGD(p, lr=0.05), 2, 600),
    'lenet5_cifar': (LeNet5, (3, 32, 32), 64,
                     lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), 1, 500),
}


def synchronize(device):
  if device.type == 'cuda':
    torch.cuda.synchronize()


def local_epochs(model, optimizer, x, y, batch, epochs, generator):
  steps = 0
  for _ in range(epochs):
    order = torch.randperm(x.shape[0], generator=generator).to(x.device)
    for start in range(0, x.shape[0], batch):
      index = order[start:start + batch]
      optimizer.zero_grad(set_to_none=True)
      torch.nn.functional.cross_entropy(model(x[index]), y[index]).backward()
      optimizer.step()
      steps += 1
  return steps


def time_step(make_model, shape, batch, make_optimizer, device, repeats):
  torch.manual_seed(0)
  model = make_model().to(device)
  optimizer = make_optimizer(model.parameters())
  x = torch.randn((3200,) + shape, device=device)
  y = torch.randint(10, (3200,), device=device)
  generator = torch.Generator().manual_seed(1)
  local_epochs(model, optimizer, x, y, batch, 1, generator)  # warm-up (cuDNN's choice, caches)
  times = []
  for _ in range(repeats):
    synchronize(device)
    start = time.perf_counter()
    steps = local_epochs(model, optimizer, x, y, batch, 1, generator)
    synchronize(device)
    times.append((time.perf_counter() - start) / steps)
  return statistics.median(times)


def time_round(make_model, shape, batch, make_optimizer, epochs, per_client, device, rounds):
  torch.manual_seed(0)
  clients = 10
  x = torch.randn((clients * per_client,) + shape, device=device)
  y = torch.randint(10, (clients * per_client,), device=device)
  global_model = make_model().to(device)
  local = make_model().to(device)
  generator = torch.Generator().manual_seed(2)
  times = []
  for r in range(rounds + 1):  # round 0 warms up
    synchronize(device)
    start = time.perf_counter()
    total = {k: torch.zeros_like(v) for k, v in global_model.state_dict().items()}
    for c in range(clients):
      local.load_state_dict(global_model.state_dict())
      optimizer = make_optimizer(local.parameters())
      part = slice(c * per_client, (c + 1) * per_client)
      local_epochs(local, optimizer, x[part], y[part], batch, epochs, generator)
      with torch.no_grad():
        for k, v in local.state_dict().items():
          total[k].add_(v, alpha=1.0 / clients)
    global_model.load_state_dict(total)
    synchronize(device)
    if r > 0:
      times.append(time.perf_counter() - start)
  return statistics.median(times)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--device', default='cuda')
  parser.add_argument('--out', required=True)
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--threads', type=int, default=0, help='torch.set_num_threads (0: leave)')
  args = parser.parse_args()
  if args.threads:
    torch.set_num_threads(args.threads)
  device = torch.device(args.device)
  result = {'torch': torch.__version__, 'device': str(device), 'threads': torch.get_num_threads()}
  if device.type == 'cuda':
    result['gpu'] = torch.cuda.get_device_name(device)
  for name, (make_model, shape, batch, make_optimizer, epochs, per_client) in CASES.items():
    if device.type == 'cuda':
      torch.cuda.reset_peak_memory_stats(device)
    row = {
        'seconds_per_step': time_step(make_model, shape, batch, make_optimizer, device,
                                      args.repeats),
        'seconds_per_round': time_round(make_model, shape, batch, make_optimizer, epochs,
                                        per_client, device, args.rounds),
        'round_shape': f'10 clients x {epochs} epochs x {per_client} examples, batch {batch}',
    }
    if device.type == 'cuda':
      row['max_memory_allocated_mb'] = torch.cuda.max_memory_allocated(device) / 2**20
    result[name] = row
    print(name, json.dumps(row), flush=True)
  with open(args.out, 'w') as f:
    json.dump(result, f, indent=2)


if __name__ == '__main__':
  main()
