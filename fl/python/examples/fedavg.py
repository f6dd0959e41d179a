"""FedAvg in Python, written to match fedkit's C++ `fedavg` bit for bit: the same
float32 operations in the same order (sum_k n_k delta_k as updates arrive, then
global + sum / n). Registered as "python_fedavg" by the tests, which check both
that and the shared conformance suite; it declares the same properties as the
C++ one (a sum of partials, so distributed runs, secure aggregation and DP take it).
"""

import torch


def scaled(x, alpha):
  if x.is_floating_point():
    return x * alpha
  return torch.round(x.double() * alpha).to(x.dtype)


def add_scaled_(y, x, alpha):
  if y.is_floating_point():
    y.add_(x, alpha=alpha)
  else:
    y.copy_(torch.round(y.double() + alpha * x.double()))


def added(y, x, alpha):
  if y.is_floating_point():
    return torch.add(y, x, alpha=alpha)
  return torch.round(y.double() + alpha * x.double()).to(y.dtype)


class FedAvg:
  sums_only = True
  dp_sums = [('sum/', 'update_sum'), ('total_weight', 'weight_total'), ('count', 'count')]

  def configure(self, global_model, ctx):
    self.layout = {name: torch.zeros_like(t) for name, t in global_model.items()}
    self.sum, self.total_weight, self.count = None, 0.0, 0

  def accumulate(self, update, ctx):
    weight = float(update.num_examples)
    if self.sum is None:
      self.sum = {name: scaled(delta, weight) for name, delta in update.delta.items()}
    else:
      for name, delta in update.delta.items():
        add_scaled_(self.sum[name], delta, weight)
    self.total_weight += weight
    self.count += 1

  def finalize(self, global_model, ctx):
    return {name: added(w, self.sum[name], 1.0 / self.total_weight)
            for name, w in global_model.items()}

  def partial_sums(self):
    sums = {'sum/' + name: (self.sum or self.layout)[name] for name in self.layout}
    sums['total_weight'] = torch.tensor(self.total_weight, dtype=torch.float64)
    sums['count'] = torch.tensor(self.count, dtype=torch.int64)
    return sums

  def merge_partial_sums(self, sums):
    self.count = int(sums['count'])
    self.total_weight = float(sums['total_weight'])
    self.sum = {name: sums['sum/' + name] for name in self.layout} if self.count else None
