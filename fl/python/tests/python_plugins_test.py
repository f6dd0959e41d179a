"""Aggregators and client hooks written in Python, run inside the C++ engine
(pytest; bazel test runs it). The shared conformance suites run on the example
plugins in //fl/python:python_conformance_test."""

import csv
import os
import sys
import tempfile
import threading
import time

import pytest
import torch

import fedkit
from fedavg import FedAvg
from fedavgm import FedAvgM
from proximal import Proximal

fedkit.register_aggregator('python_fedavg', FedAvg)
fedkit.register_aggregator('python_fedavgm', FedAvgM)
fedkit.register_client_hook('python_prox', Proximal)

# The quickstart (Fashion-MNIST, 100 clients, 10 a round), three rounds.
QUICKSTART = fedkit.load_spec(os.path.join('experiments', 'quickstart.textproto')).with_overrides(
    'server { rounds: 3 } simulation { workers: 1 threads_per_worker: 1 }')

# A small run (6,000 Fashion-MNIST images, 20 clients), three rounds of five.
SMALL = fedkit.load_spec(os.path.join('fl', 'python', 'tests', 'small.textproto')).with_overrides(
    'server { rounds: 3 clients_per_round: 5 }')


def out_dir(name):
  return os.path.join(os.environ.get('TEST_TMPDIR', tempfile.mkdtemp()), name)


def aggregator(name, options=None):
  """An aggregator block; options as google.protobuf.Struct fields."""
  fields = ''.join(f' fields {{ key: "{k}" value {{ number_value: {v} }} }}'
                   for k, v in (options or {}).items())
  struct = f' options {{ [type.googleapis.com/google.protobuf.Struct] {{{fields} }} }}' if fields else ''
  return f'aggregator {{ name: "{name}"{struct} }}'


def run(spec, name, *overrides, **kwargs):
  return fedkit.run(spec.with_overrides('\n'.join(overrides)), out_dir(name), **kwargs)


def assert_same_models(a, b):
  assert a.keys() == b.keys()
  for name in a:
    assert torch.equal(a[name], b[name]), name


def test_python_fedavg_is_bit_identical_to_the_cpp_one_on_the_quickstart():
  cpp = run(QUICKSTART, 'cpp_fedavg', 'aggregator { name: "fedavg" }')
  python = run(QUICKSTART, 'python_fedavg', aggregator('python_fedavg'))
  assert [r['test_accuracy'] for r in python.rows] == [r['test_accuracy'] for r in cpp.rows]
  assert [r['train_loss'] for r in python.rows] == [r['train_loss'] for r in cpp.rows]
  assert_same_models(python.model, cpp.model)
  assert cpp.rows[-1]['test_accuracy'] > 0.5  # it learnt: not two runs that both did nothing


def test_python_fedavgm_with_options_is_bit_identical_to_the_cpp_one():
  cpp = run(QUICKSTART, 'cpp_fedavgm', 'aggregator { name: "fedavgm" options { '
            '[type.googleapis.com/fedkit.aggregators.FedAvgMOptions] { server_lr: 0.5 momentum: 0.7 } } }')
  python = run(QUICKSTART, 'python_fedavgm',
               aggregator('python_fedavgm', {'server_lr': 0.5, 'momentum': 0.7}))
  assert_same_models(python.model, cpp.model)
  default = run(QUICKSTART, 'python_fedavgm_default', aggregator('python_fedavgm'))
  first = next(iter(python.model))
  assert not torch.equal(default.model[first], python.model[first])


def test_models_and_updates_cross_without_copies():
  seen = {'returned': [], 'configured': [], 'updates': 0}

  class Recording(FedAvg):

    def configure(self, global_model, ctx):
      seen['configured'].append({k: t.data_ptr() for k, t in global_model.items()})
      super().configure(global_model, ctx)

    def accumulate(self, update, ctx):
      seen['updates'] += 1
      super().accumulate(update, ctx)

    def finalize(self, global_model, ctx):
      model = super().finalize(global_model, ctx)
      seen['returned'].append({k: t.data_ptr() for k, t in model.items()})
      return model

  fedkit.register_aggregator('recording', Recording)
  run(SMALL, 'zero_copy', aggregator('recording'))
  # What finalize returned is the model the next round starts from, same storage.
  assert seen['configured'][1] == seen['returned'][0]
  assert seen['configured'][2] == seen['returned'][1]
  assert seen['updates'] == 15


def test_python_plugins_run_from_worker_threads_with_the_gil_free_between_calls():
  # Two workers train clients in parallel, each calling the Python hook at every
  # step; the run holding the GIL would deadlock them (they wait for it while it
  # waits for them), and a Python thread keeps counting meanwhile.
  ticks, done = [], threading.Event()

  def count():
    while not done.is_set():
      ticks.append(time.monotonic())
      time.sleep(0.01)

  counter = threading.Thread(target=count)
  counter.start()
  result = {}
  runner = threading.Thread(target=lambda: result.update(r=run(
      SMALL, 'workers', aggregator('python_fedavg'), 'simulation { workers: 2 }',
      'client { hooks { name: "python_prox" } }')))
  start = time.monotonic()
  runner.start()
  runner.join(timeout=300)
  end = time.monotonic()
  done.set()
  counter.join()
  assert not runner.is_alive(), 'the run did not finish: deadlocked'
  assert len(result['r'].rows) == 3
  during = [t for t in ticks if start < t < end]
  assert len(during) >= 10, f'{len(during)} ticks in {end - start:.2f} s'


def test_a_python_exception_stops_the_run_and_reports_its_traceback():

  class Broken(FedAvg):

    def accumulate(self, update, ctx):
      if ctx.round == 2:
        return update.num_examples / 0
      return super().accumulate(update, ctx)

  fedkit.register_aggregator('broken', Broken)
  with pytest.raises(RuntimeError) as error:
    run(SMALL, 'broken', aggregator('broken'))
  message = str(error.value)
  assert 'python aggregator "broken": accumulate raised:' in message
  assert 'Traceback (most recent call last)' in message
  assert 'python_plugins_test.py' in message and 'return update.num_examples / 0' in message
  assert 'ZeroDivisionError: division by zero' in message
  with open(os.path.join(out_dir('broken'), 'metrics.csv')) as f:
    assert [row['round'] for row in csv.DictReader(f)] == ['1']
  # The process goes on: the next run works.
  assert len(run(SMALL, 'after_broken', aggregator('python_fedavg')).rows) == 3


def test_an_exception_where_no_status_can_be_returned_still_stops_the_run():
  # save_state runs when the checkpoint after round 1 is written; it cannot fail
  # there, so the next round's configure reports it.

  class CannotSave(FedAvgM):

    def save_state(self):
      raise OSError('disk full')

  fedkit.register_aggregator('cannot_save', CannotSave)
  with pytest.raises(RuntimeError, match=r'(?s)python aggregator "cannot_save": save_state raised:.*'
                     r'OSError: disk full'):
    run(SMALL, 'cannot_save', aggregator('cannot_save'), 'output { checkpoint_every: 1 }')
  with open(os.path.join(out_dir('cannot_save'), 'metrics.csv')) as f:
    assert [row['round'] for row in csv.DictReader(f)] == ['1']


def test_a_python_result_of_the_wrong_shape_is_an_error_naming_the_tensor():

  class Misshapen(FedAvg):

    def finalize(self, global_model, ctx):
      model = super().finalize(global_model, ctx)
      model['layers.0.bias'] = model['layers.0.bias'][:3]
      return model

  fedkit.register_aggregator('misshapen', Misshapen)
  with pytest.raises(RuntimeError, match=r'finalize\'s result\["layers.0.bias"\]: expected Float of '
                     r'shape \[64\], got Float of shape \[3\]'):
    run(SMALL, 'misshapen', aggregator('misshapen'))


def test_bad_options_are_spec_errors_naming_the_plugin():
  with pytest.raises(fedkit.SpecError) as error:
    fedkit.validate(SMALL.with_overrides(aggregator('python_fedavgm', {'momentun': 0.5})))
  assert any('python aggregator "python_fedavgm"' in e and "unexpected keyword argument 'momentun'" in e
             for e in error.value.errors), error.value.errors


def test_python_and_cpp_halves_compose():
  # A Python hook under a C++ aggregator, a C++ hook planned by a Python
  # aggregator, a Python aggregator as a C++ wrapper's base, and a Python hook's
  # extras and state reaching a Python aggregator.

  class RoundsSeen(FedAvg):

    def accumulate(self, update, ctx):
      ctx.diagnostics['most_rounds'] = max(
          ctx.diagnostics.get('most_rounds', 0), float(update.extras['python_prox']['rounds']))
      super().accumulate(update, ctx)

  fedkit.register_aggregator('rounds_seen', RoundsSeen)
  hook = 'client { hooks { name: "python_prox" options { [type.googleapis.com/google.protobuf.Struct] ' \
         '{ fields { key: "mu" value { number_value: 1.0 } } } } } }'
  plain = run(SMALL, 'plain', 'aggregator { name: "fedavg" }')
  with_hook = run(SMALL, 'cpp_with_python_hook', 'aggregator { name: "fedavg" }', hook)
  first = next(iter(plain.model))
  assert not torch.equal(plain.model[first], with_hook.model[first])

  seen = run(SMALL, 'python_with_python_hook', aggregator('rounds_seen'), hook,
             'server { rounds: 8 clients_per_round: 10 }')
  most = [row['most_rounds'] for row in seen.rows]
  assert most[0] == 1 and most == sorted(most) and most[-1] >= 3, most

  # A C++ hook planned by a Python aggregator is C++ FedProx, bit for bit.
  class PlansFedProx(FedAvg):

    def configure(self, global_model, ctx):
      super().configure(global_model, ctx)
      return {'hooks': [('fedprox', {'mu': 0.5})]}

  fedkit.register_aggregator('plans_fedprox', PlansFedProx)
  planned = run(SMALL, 'python_plans_cpp_hook', aggregator('plans_fedprox'))
  cpp_fedprox = run(SMALL, 'cpp_fedprox', 'aggregator { name: "fedprox" options { '
                    '[type.googleapis.com/fedkit.aggregators.FedProxOptions] { mu: 0.5 } } }')
  assert_same_models(planned.model, cpp_fedprox.model)
  assert not torch.equal(planned.model[first], plain.model[first])

  wrapped = run(SMALL, 'norm_clip_over_python', 'aggregator { name: "norm_clip" options { '
                '[type.googleapis.com/fedkit.aggregators.NormClipOptions] { max_norm: 1e9 '
                'base { name: "python_fedavg" } } } }')
  cpp_wrapped = run(SMALL, 'norm_clip_over_cpp', 'aggregator { name: "norm_clip" options { '
                    '[type.googleapis.com/fedkit.aggregators.NormClipOptions] { max_norm: 1e9 '
                    'base { name: "fedavg" } } } }')
  assert_same_models(wrapped.model, cpp_wrapped.model)


def test_registry_lists_python_plugins_and_keeps_cpp_names():
  catalog = fedkit.plugins()
  assert catalog['aggregator']['python_fedavg']['options_type'] == 'google.protobuf.Struct'
  assert 'python_prox' in catalog['client_hook']
  with pytest.raises(ValueError, match='aggregator "fedavg" is already registered at '
                     r'aggregators/fedavg/fedavg.cc:\d+; choose another name'):
    fedkit.register_aggregator('fedavg', FedAvg)
  with pytest.raises(ValueError, match='no finalize method'):
    fedkit.register_aggregator('half', type('Half', (), {'accumulate': lambda self, u, c: None}))


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q', '-p', 'no:cacheprovider']))
