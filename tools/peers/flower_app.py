#!/usr/bin/env python3
"""FedAvg in Flower's simulation, written as Flower's own PyTorch quickstart is:
a ClientApp whose train function trains on the node's partition and replies with
its weights and example count, and a ServerApp running Flower's FedAvg strategy
with a centralised evaluation of the global model after every round. The data,
split, model and local SGD are fl_torch's, which the plain loop uses too.

Runs under the virtual environment tools/peers/setup.sh makes:

  flower_app.py --config=config.json --result=out.json

config.json: data_dir, partition, rounds, clients_per_round, epochs, batch_size,
lr, hidden, seed. A Flower project would read these from pyproject.toml's run
config; run_simulation, the Python entry point, takes none, so every process
(Ray's workers included, which inherit the environment) reads them from the file
FEDKIT_PEER_CONFIG names.
"""

import argparse
import json
import os
import sys
import time

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fl_torch  # pylint: disable=wrong-import-position

_cache = {}


def config():
  if 'config' not in _cache:
    with open(os.environ['FEDKIT_PEER_CONFIG']) as f:
      _cache['config'] = json.load(f)
  return _cache['config']


def training_data():
  """The training split and every client's indices, loaded once per process."""
  if 'train' not in _cache:
    x, y = fl_torch.load_split(config()['data_dir'], train=True)
    _cache['train'] = (x, y, fl_torch.read_partition(config()['partition'], len(y)))
  return _cache['train']


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context):
  cfg = config()
  model = fl_torch.mlp(cfg['hidden'])
  model.load_state_dict(msg.content['arrays'].to_torch_state_dict())
  x, y, clients = training_data()
  partition_id = int(context.node_config['partition-id'])
  rows = clients[partition_id]
  generator = torch.Generator().manual_seed(cfg['seed'] * 1000003 + partition_id)
  train_loss = fl_torch.train_locally(model, x[rows], y[rows], cfg['epochs'], cfg['batch_size'],
                                      msg.content['config']['lr'], generator)
  content = RecordDict({
      'arrays': ArrayRecord(model.state_dict()),
      'metrics': MetricRecord({'train_loss': train_loss, 'num-examples': len(rows)}),
  })
  return Message(content=content, reply_to=msg)


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
  del context
  cfg = config()
  torch.manual_seed(cfg['seed'])
  model = fl_torch.mlp(cfg['hidden'])
  test_x, test_y = fl_torch.load_split(cfg['data_dir'], train=False)
  num_clients = cfg['num_clients']

  def evaluate_global(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    del server_round
    model.load_state_dict(arrays.to_torch_state_dict())
    return MetricRecord({'accuracy': fl_torch.evaluate(model, test_x, test_y)})

  strategy = FedAvg(fraction_train=cfg['clients_per_round'] / num_clients,
                    fraction_evaluate=0.0,
                    min_train_nodes=cfg['clients_per_round'],
                    min_available_nodes=num_clients)
  result = strategy.start(grid=grid,
                          initial_arrays=ArrayRecord(model.state_dict()),
                          num_rounds=cfg['rounds'],
                          train_config=ConfigRecord({'lr': cfg['lr']}),
                          evaluate_fn=evaluate_global)
  curve = [result.evaluate_metrics_serverapp[r]['accuracy']
           for r in sorted(result.evaluate_metrics_serverapp) if r > 0]
  # The ServerApp may run in a process of its own: the result goes to a file.
  with open(os.environ['FEDKIT_PEER_RESULT'], 'w') as f:
    json.dump({'accuracy': curve[-1], 'accuracy_curve': curve}, f)


def run():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--config', required=True)
  parser.add_argument('--result', required=True)
  args = parser.parse_args()
  # Ray's workers import the apps by module name, as `flwr run` has them do, so
  # that each worker process keeps its loaded data between messages (apps
  # defined in __main__ would travel by value, their cache empty every time).
  os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (HERE, os.environ.get('PYTHONPATH')) if p)
  import flower_app  # pylint: disable=import-outside-toplevel,import-self
  os.environ['FEDKIT_PEER_CONFIG'] = os.path.abspath(args.config)
  os.environ['FEDKIT_PEER_RESULT'] = os.path.abspath(args.result)
  if os.path.exists(args.result):
    os.remove(args.result)
  start = time.monotonic()
  run_simulation(server_app=flower_app.server_app, client_app=flower_app.client_app,
                 num_supernodes=config()['num_clients'])
  if not os.path.exists(args.result):
    sys.exit('flower_app: the ServerApp finished without a result (see the log above)')
  with open(args.result) as f:
    result = json.load(f)
  import flwr  # pylint: disable=import-outside-toplevel
  import ray  # pylint: disable=import-outside-toplevel
  result.update(seconds_inside=time.monotonic() - start, flwr=flwr.__version__,
                ray=ray.__version__, torch=torch.__version__)
  with open(args.result, 'w') as f:
    json.dump(result, f)


if __name__ == '__main__':
  run()
