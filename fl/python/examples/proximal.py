"""A client hook in Python: FedProx's proximal term (mu / 2) ||w - w_global||^2
added to every local step's loss, and a per-client count of the rounds it
trained in, kept in the hook's state and sent as an extra. Registered as
"python_prox" by the tests, which run it through the client hooks' conformance
suite."""

import torch


class Proximal:

  def __init__(self, mu=0.01):
    if not mu >= 0:
      raise ValueError(f'mu must be >= 0, got {mu}')
    self.mu = mu

  def loss_term(self, ctx):
    return 0.5 * self.mu * sum(((w - ctx.global_model[name])**2).sum() for name, w in ctx.model.items())

  def after_training(self, ctx, update):
    rounds = ctx.state.get('rounds', torch.zeros((), dtype=torch.int64)) + 1
    ctx.state['rounds'] = rounds
    return {'python_prox': {'rounds': rounds.to(torch.float32)}}
