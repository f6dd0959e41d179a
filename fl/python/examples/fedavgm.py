"""FedAvgM (Hsu, Qi & Brown 2019) in Python: server momentum over the clients'
size-weighted mean delta, m <- beta m + mean, w <- w + eta m. The same float32
operations in the same order as fedkit's C++ `fedavgm`, so the two runs agree bit
for bit (docs/python.md; the tests check it). Parameters only: a model with
buffers (BatchNorm) needs them averaged, which this example leaves out."""

import torch


class FedAvgM:

  def __init__(self, server_lr=1.0, momentum=0.9):
    self.server_lr, self.momentum, self.m = server_lr, momentum, None

  def configure(self, global_model, ctx):
    self.sum, self.total = None, 0.0

  def accumulate(self, update, ctx):
    n = float(update.num_examples)
    if self.sum is None:
      self.sum = {name: delta * n for name, delta in update.delta.items()}
    else:
      for name, delta in update.delta.items():
        self.sum[name].add_(delta, alpha=n)
    self.total += n

  def finalize(self, global_model, ctx):
    if self.m is None:
      self.m = {name: torch.zeros_like(w) for name, w in global_model.items()}
    for name, m in self.m.items():
      m.mul_(self.momentum).add_(self.sum[name] * (1.0 / self.total))
    return {name: torch.add(w, self.m[name], alpha=self.server_lr) for name, w in global_model.items()}

  def save_state(self):
    return dict(self.m or {})

  def restore_state(self, state):
    self.m = dict(state) or None
