"""Tests of the fedkit Python package over the C++ engine (pytest; bazel test runs it)."""

import os
import sys
import tempfile
import threading
import time

import pytest
import torch

import fedkit

# A small run (6,000 Fashion-MNIST images, 20 clients) that takes seconds, as text.
with open(os.path.join('fl', 'python', 'tests', 'small.textproto')) as f:
  SMALL = f.read()


def out_dir(name):
  return os.path.join(os.environ.get('TEST_TMPDIR', tempfile.mkdtemp()), name)


def test_load_spec_from_text_file_and_dict_agree():
  from_text = fedkit.load_spec(SMALL)
  path = out_dir('small.textproto')
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write(SMALL)
  assert fedkit.load_spec(path).text == from_text.text
  as_dict = {
      'name': 'python', 'seed': 5, 'device': 'CPU',
      'dataset': {'name': 'fashion_mnist', 'options': {
          '@type': 'type.googleapis.com/fedkit.data.FashionMnistOptions',
          'trainLimit': 6000, 'testLimit': 2000}},
      'partition': {'name': 'dirichlet', 'numClients': 20, 'options': {
          '@type': 'type.googleapis.com/fedkit.data.DirichletOptions', 'alpha': 0.5}},
      'model': {'name': 'mlp', 'options': {
          '@type': 'type.googleapis.com/fedkit.models.MlpOptions', 'hidden': [64]}},
      'client': {'epochs': 1, 'batchSize': 32, 'optimizer': {'kind': 'SGD', 'lr': 0.05}},
      'server': {'rounds': 4, 'clientsPerRound': 10},
      'simulation': {'workers': 1, 'threadsPerWorker': 1},
      'aggregator': {'name': 'fedavg'},
  }
  assert fedkit.load_spec(as_dict).text == from_text.text
  quickstart = fedkit.load_spec(os.path.join('experiments', 'quickstart.textproto'))
  assert 'name: "quickstart"' in quickstart.text


def test_a_spec_that_does_not_parse_names_the_problem():
  with pytest.raises(fedkit.SpecError) as error:
    fedkit.load_spec('server { roundz: 3 }')
  assert 'roundz' in str(error.value)
  with pytest.raises(fedkit.SpecError):
    fedkit.load_spec({'server': {'roundz': 3}})


def test_validate_reports_every_problem_with_its_field_path():
  spec = fedkit.load_spec(SMALL).with_overrides(
      'server { rounds: 0 } client { optimizer { lr: -0.1 } } aggregator { name: "fedavgg" }')
  with pytest.raises(fedkit.SpecError) as error:
    fedkit.validate(spec)
  errors = error.value.errors
  assert len(errors) == 3, errors
  assert any(e.startswith('server.rounds: must be >= 1, got 0') for e in errors)
  assert any(e.startswith('client.optimizer.lr: must be > 0, got -0.1') for e in errors)
  assert any(e.startswith('aggregator.name: aggregator "fedavgg" is not registered') for e in errors)
  assert fedkit.validate(SMALL).text == fedkit.load_spec(SMALL).text


def test_run_returns_the_rows_model_and_summary_it_wrote():
  directory = out_dir('run')
  result = fedkit.run(SMALL, directory)
  assert [row['round'] for row in result.rows] == [1, 2, 3, 4]
  assert 0.1 < result.rows[-1]['test_accuracy'] <= 1.0
  assert result.summary['rounds'] == 4
  assert result.summary['final_test_accuracy'] == pytest.approx(result.rows[-1]['test_accuracy'],
                                                                abs=1e-6)
  with open(os.path.join(directory, 'metrics.csv')) as f:
    assert len(f.read().strip().split('\n')) == 1 + 4
  assert isinstance(result.model['layers.0.weight'], torch.Tensor)
  frame = result.dataframe()
  assert list(frame.index) == [1, 2, 3, 4]
  assert frame.loc[4, 'test_accuracy'] == result.rows[-1]['test_accuracy']


def test_on_round_sees_each_row_and_model_and_can_stop_the_run():
  seen = []
  pointers = []

  def watch(row, model):
    seen.append(row['round'])
    pointers.append(model['layers.0.weight'].data_ptr())
    return row['round'] < 2

  result = fedkit.run(SMALL, out_dir('stopped'), on_round=watch, with_model=True)
  assert seen == [1, 2]
  assert [row['round'] for row in result.rows] == [1, 2]
  assert result.summary['rounds'] == 2
  # The last model handed to the callback is the model returned, not a copy of it.
  assert result.model['layers.0.weight'].data_ptr() == pointers[-1]


def test_an_exception_in_on_round_stops_the_run_and_propagates():
  def fail(row, model):
    raise KeyError('from the callback')

  with pytest.raises(KeyError, match='from the callback'):
    fedkit.run(SMALL, out_dir('raised'), on_round=fail)


def test_runs_release_the_gil():
  # A Python thread keeps counting while the engine trains; with the GIL held by
  # the run it could not advance until the run returned.
  ticks = []
  done = threading.Event()

  def count():
    while not done.is_set():
      ticks.append(time.monotonic())
      time.sleep(0.01)

  counter = threading.Thread(target=count)
  counter.start()
  first_row = []

  def note(row, model):
    if not first_row:
      first_row.append(time.monotonic())

  start = time.monotonic()
  fedkit.run(SMALL, out_dir('gil'), on_round=note)
  end = time.monotonic()
  done.set()
  counter.join()
  during = [t for t in ticks if start < t < first_row[0]]
  assert len(during) >= 5, f'{len(during)} ticks while the engine ran ({first_row[0] - start:.2f} s)'
  assert end > start


def test_a_saved_model_loads_and_evaluates_as_the_run_did():
  result = fedkit.run(SMALL, out_dir('evaluate'))
  last = result.rows[-1]
  path = os.path.join(out_dir('evaluate'), 'model.pt')
  saved = fedkit.load_model(path)
  assert list(saved) == list(result.model)
  assert all(torch.equal(saved[k], result.model[k]) for k in saved)
  for model in (path, saved):
    evaluation = fedkit.evaluate(SMALL, model)
    assert evaluation['examples'] == 2000
    assert evaluation['test_accuracy'] == pytest.approx(last['test_accuracy'], abs=1e-4)
    assert evaluation['test_loss'] == pytest.approx(last['test_loss'], rel=1e-4)
  untrained = fedkit.evaluate(SMALL, {k: torch.zeros_like(t) for k, t in saved.items()})
  assert untrained['test_accuracy'] < last['test_accuracy'] - 0.2
  narrower = fedkit.load_spec(SMALL).with_overrides('model { options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] } } }')
  with pytest.raises(ValueError, match=r'layers\.0\.weight'):
    fedkit.evaluate(narrower, saved)  # hidden 32: the saved model's 64 units do not fit
  with pytest.raises(ValueError, match='layers.0.weight'):
    fedkit.evaluate(narrower, path)


def test_plugins_lists_every_registry_with_option_schemas():
  catalog = fedkit.plugins()
  assert {'dataset', 'partitioner', 'model', 'aggregator', 'client_hook'} <= set(catalog)
  assert 'fedavg' in catalog['aggregator'] and 'fedlaw' in catalog['aggregator']
  dirichlet = catalog['partitioner']['dirichlet']
  assert dirichlet['options_type'] == 'fedkit.data.DirichletOptions'
  alpha = next(f for f in dirichlet['fields'] if f['name'] == 'alpha')
  assert alpha['type'] == 'double' and alpha['comment']


if __name__ == '__main__':
  sys.exit(pytest.main([__file__, '-q', '-p', 'no:cacheprovider']))
