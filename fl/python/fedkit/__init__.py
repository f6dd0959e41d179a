"""fedkit from Python: load and validate specs, run them, read their results.

    import fedkit
    spec = fedkit.load_spec("experiments/quickstart.textproto")
    spec = spec.with_overrides("server { rounds: 5 }")
    result = fedkit.run(spec, "/tmp/quickstart",
                        on_round=lambda row, model: print(row["round"], row["test_accuracy"]))
    result.rows[-1]["test_accuracy"], result.summary["best_test_accuracy"], result.dataframe()

The engine is fedkit's C++ simulator (every registered plugin); runs release the
GIL while it trains. Models cross as dicts of torch.Tensor that share the C++
tensors' storage. docs/python.md has the whole tour.
"""

import importlib.util
import inspect
import json
import os
import sys

import torch  # loaded before the engine, which hands tensors to it

__version__ = '0.1.0'


def _load_engine():
  try:
    from fedkit import _fedkit  # pylint: disable=import-outside-toplevel
    return _fedkit
  except ImportError:
    pass
  # From a checkout (PYTHONPATH=<checkout>/fl/python): the extension Bazel built.
  built = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'bazel-bin',
                       'fl', 'python', 'fedkit', '_fedkit.so')
  if not os.path.exists(built):
    raise ImportError("fedkit's engine is not built: run `bazel build //fl/python:fedkit` in the "
                      'checkout (and use /usr/bin/python3)')
  spec = importlib.util.spec_from_file_location('fedkit._fedkit', built)
  module = importlib.util.module_from_spec(spec)
  sys.modules['fedkit._fedkit'] = module
  spec.loader.exec_module(module)
  return module


_fedkit = _load_engine()

__all__ = ['Spec', 'SpecError', 'Result', 'load_spec', 'validate', 'run', 'plugins', 'Aggregator',
           'ClientHook', 'register_aggregator', 'register_client_hook', 'load_model', 'evaluate']


class SpecError(ValueError):
  """A spec that does not parse or cannot run; `errors` lists every problem, each
  starting with its field path (as run_experiment prints them)."""

  def __init__(self, message, errors):
    super().__init__(message)
    self.errors = list(errors)


def _spec_errors(call, *args):
  try:
    return call(*args)
  except _fedkit.SpecError as e:
    raise SpecError(e.args[0], e.args[1] if len(e.args) > 1 else [e.args[0]]) from None


class Spec:
  """An experiment spec (fedkit.ExperimentSpec), held as text format."""

  def __init__(self, text):
    self._text = _spec_errors(_fedkit.spec_from_text, text)

  @property
  def text(self):
    return self._text

  def with_overrides(self, text):
    """A copy with `text` (text format, as run_experiment's --set) merged in: a
    scalar field replaced, a message merged field by field, a repeated field appended."""
    return Spec(self._text + '\n' + text)

  def __repr__(self):
    return f'fedkit.Spec(<{len(self._text)} characters>)'

  def __str__(self):
    return self._text


def load_spec(source):
  """A Spec from a path to a text-proto file, a text-proto string, or a dict in
  protobuf's JSON mapping (an `options` Any is {"@type": "type.googleapis.com/...", ...})."""
  if isinstance(source, Spec):
    return source
  if isinstance(source, dict):
    return Spec(_spec_errors(_fedkit.spec_from_json, json.dumps(source)))
  if isinstance(source, os.PathLike) or (isinstance(source, str) and '\n' not in source and
                                          source.endswith(('.textproto', '.txtpb', '.pbtxt'))):
    return Spec(_spec_errors(_fedkit.spec_from_file, os.fspath(source)))
  if isinstance(source, str):
    return Spec(source)
  raise TypeError(f'load_spec takes a path, a text-proto string or a dict, not {type(source).__name__}')


def validate(spec):
  """Raises SpecError listing every problem of `spec`, or returns the Spec."""
  spec = load_spec(spec)
  errors = _fedkit.validate(spec.text)
  if errors:
    raise SpecError('the spec cannot run:\n' + '\n'.join(errors), errors)
  return spec


class Result:
  """A finished run: `rows` (one dict per evaluated round, metrics.csv's columns
  and the diagnostics), `model` (the final global model, name -> torch.Tensor),
  `summary` (summary.json as a dict) and `output_dir`."""

  def __init__(self, rows, model, output_dir):
    self.rows = rows
    self.model = model
    self.output_dir = output_dir
    with open(os.path.join(output_dir, 'summary.json')) as f:
      self.summary = json.load(f)

  def dataframe(self):
    """The rows as a pandas DataFrame indexed by round (pandas must be installed)."""
    import pandas  # pylint: disable=import-outside-toplevel
    return pandas.DataFrame(self.rows).set_index('round')

  def __repr__(self):
    last = self.rows[-1] if self.rows else {}
    return (f'fedkit.Result({len(self.rows)} rows, last round {last.get("round")}, '
            f'test accuracy {last.get("test_accuracy")}, in {self.output_dir})')


def run(spec, output_dir, on_round=None, with_model=False):
  """Runs `spec` (anything load_spec takes) into `output_dir` and returns a Result.

  on_round(row, model), if given, is called after each evaluated round with the
  round's metrics row (a dict) and, with with_model=True, the global model (a dict
  of torch.Tensor sharing the engine's storage: copy what you keep, the engine
  reuses it); returning False ends the run after that round, as if it were the
  last. An exception it raises ends the run and propagates from here. SpecError
  when the spec cannot run.
  """
  spec = load_spec(spec)
  rows, model = _spec_errors(_fedkit.run, spec.text, os.fspath(output_dir), on_round, with_model)
  return Result(rows, model, os.fspath(output_dir))


def load_model(path):
  """A saved model (a run's model.pt or best_model.pt) as a dict name ->
  torch.Tensor, the names a torch.nn.Module of the same layers has
  (module.load_state_dict takes it)."""
  safe_globals = getattr(torch.serialization, 'safe_globals', None)
  if safe_globals is None:  # torch 1.x: torch.load has no weights-only mode
    return torch.load(os.fspath(path))
  # torch 2.x loads weights only by default; LibTorch's pickler tags the dict's
  # types with restore_type_tag, which returns its argument unchanged.
  from torch.jit import _pickle  # pylint: disable=import-outside-toplevel
  with safe_globals([_pickle.restore_type_tag]):
    return torch.load(os.fspath(path), weights_only=True)


def evaluate(spec, model):
  """{"test_accuracy", "test_loss", "examples"} of `model` (a path to a model.pt,
  or a dict of tensors by name such as Result.model) on `spec`'s test split,
  built and evaluated as the run evaluates its global model each round.
  ValueError naming the tensor when the model does not fit the spec's
  architecture; SpecError when the spec cannot run."""
  spec = load_spec(spec)
  return _spec_errors(_fedkit.evaluate, spec.text, model)


def plugins():
  """Every registry, as run_experiment --list shows it: {kind: {name: {"options_type",
  "comment", "fields"}}}, each field a dict with "name", "type", "repeated",
  "has_presence", "default_value", "comment", "enum_values" and, for a message,
  its own "fields" (fl/plugin_schema.proto)."""
  catalog = json.loads(_fedkit.plugin_catalog_json())
  return {
      kind['kind']: {
          plugin['name']: {
              'options_type': plugin['options_type'],
              'comment': plugin['comment'],
              'fields': plugin['fields'],
          } for plugin in kind['plugins']
      } for kind in catalog['kinds']
  }


class Aggregator:
  """The server half of a method, in Python (subclassing is optional: the engine
  looks up these names). Each round: configure, then accumulate once per accepted
  update, then finalize. Models and deltas are dicts name -> torch.Tensor sharing
  the engine's storage; `ctx` carries the round's facts (round, device, round_seed,
  num_clients, num_examples, client_momentum, expected_cohort_size,
  poisson_sampling, planned_rounds, proxy with .x and .y or None) and what the
  method reports: ctx.diagnostics[name] = float (a metrics.csv column),
  ctx.summary[name] = JSON value (summary.json), ctx.evaluation_model = dict (the
  model to evaluate when it is not the training iterate).

  The options a spec gives (`options { [type.googleapis.com/google.protobuf.Struct]
  { fields { key: "beta" value { number_value: 0.9 } } } }`, or
  {"beta": 0.9} as a dict spec's options "value") reach __init__ as keyword arguments.
  The class attributes below are its declared properties, checked by the
  conformance suite as a C++ aggregator's are (fl/aggregator.h).
  """
  order_invariant = True
  single_client_identity = True
  uses_proxy = False
  client_hooks = []
  step_aware = False
  needs_local_sgd = False
  sums_only = False
  # [(prefix, role)], role one of update_sum, squared_norm_sum, weight_total, count.
  dp_sums = []

  def configure(self, global_model, ctx):
    """Starts a round; may return {"hooks": [name or (name, options dict)],
    "broadcast": {name: {tensor name: tensor}}}."""
    return None

  def accumulate(self, update, ctx):
    """Takes one update: .client_id, .delta, .num_examples, .local_steps,
    .planned_steps, .extras ({name: dict}), .metrics, .bytes_sent."""
    raise NotImplementedError

  def finalize(self, global_model, ctx):
    """Returns the new global model: a dict with every tensor of global_model."""
    raise NotImplementedError


class ClientHook:
  """The client half of a method, in Python: before_training(ctx),
  loss_term(ctx) -> tensor or None (added to the loss every local step; ctx.model
  holds the live parameters, so autograd flows through it) and
  after_training(ctx, update) -> {name: {tensor name: tensor}} extras or None.
  ctx: client_id, round, model, global_model, broadcast, state (a dict kept on
  this client across rounds while its updates are accepted), x, y,
  train_indices, seed, learning_rate, batch_size. planned_only = True for a hook
  that works only when its aggregator plans it."""
  planned_only = False


def _where(cls):
  try:
    return inspect.getsourcefile(cls) or '<python>', inspect.getsourcelines(cls)[1]
  except (OSError, TypeError):
    return '<python>', 0


def _register(call, name, cls):
  def register(cls):
    file, line = _where(cls)
    call(name, cls, file, line)
    return cls
  return register if cls is None else register(cls)


def register_aggregator(name, cls=None):
  """Registers the class `cls` (see Aggregator) as aggregator `name` in the
  engine's registry, beside the C++ ones; usable as a decorator. A spec then
  names it like any aggregator, also as a wrapper's base. ValueError when a C++
  plugin has the name; a Python one is replaced."""
  return _register(_fedkit.register_aggregator, name, cls)


def register_client_hook(name, cls=None):
  """Registers the class `cls` (see ClientHook) as client hook `name`; usable as a
  decorator."""
  return _register(_fedkit.register_client_hook, name, cls)
