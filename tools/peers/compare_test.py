"""The comparison's pieces: the plain loop on a tiny synthetic set, FedAvg's
average, reading accuracies, and the table's medians, ranges and ratios."""

import gzip
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # pylint: disable=wrong-import-position

HERE = os.path.dirname(os.path.abspath(__file__))
# The plain loop runs under Debian's interpreter, whose torch tools/setup.sh installs.
TORCH_PYTHON = '/usr/bin/python3'


def write_idx(path, array_bytes, shape):
  with gzip.open(path, 'wb') as f:
    f.write(struct.pack('>HBB', 0, 0x08, len(shape)))
    f.write(struct.pack(f'>{len(shape)}I', *shape))
    f.write(bytes(array_bytes))


def synthetic_fashion_mnist(directory, n_train, n_test):
  """Two classes told apart by which half of the image is bright."""
  for prefix, n in (('train', n_train), ('t10k', n_test)):
    images, labels = bytearray(), bytearray()
    for i in range(n):
      label = i % 2
      row = [(200 if (p < 392) == (label == 0) else 10) for p in range(784)]
      images += bytes(row)
      labels.append(label)
    write_idx(os.path.join(directory, f'{prefix}-images-idx3-ubyte.gz'), images, (n, 28, 28))
    write_idx(os.path.join(directory, f'{prefix}-labels-idx1-ubyte.gz'), labels, (n,))


class PlainLoopTest(unittest.TestCase):

  def test_learns_a_separable_set_on_fedkits_split(self):
    with tempfile.TemporaryDirectory() as d:
      synthetic_fashion_mnist(d, 80, 40)
      partition = os.path.join(d, 'partition.json')
      with open(partition, 'w') as f:
        json.dump({'num_examples': 80,
                   'clients': [{'indices': list(range(k, 80, 4))} for k in range(4)]}, f)
      result = os.path.join(d, 'result.json')
      subprocess.run([TORCH_PYTHON, os.path.join(HERE, 'plain_loop.py'), f'--data_dir={d}',
                      f'--partition={partition}', '--rounds=3', '--clients_per_round=2',
                      '--epochs=1', '--batch_size=10', '--lr=0.05', '--hidden', '16',
                      f'--result={result}'], check=True)
      with open(result) as f:
        out = json.load(f)
      self.assertEqual(len(out['accuracy_curve']), 3)
      self.assertEqual(out['accuracy'], 1.0)

  def test_a_partition_of_another_training_set_is_refused(self):
    with tempfile.TemporaryDirectory() as d:
      synthetic_fashion_mnist(d, 20, 10)
      partition = os.path.join(d, 'partition.json')
      with open(partition, 'w') as f:
        json.dump({'num_examples': 60000, 'clients': [{'indices': [0]}]}, f)
      run = subprocess.run([TORCH_PYTHON, os.path.join(HERE, 'plain_loop.py'), f'--data_dir={d}',
                            f'--partition={partition}', '--rounds=1', '--clients_per_round=1',
                            '--epochs=1', '--batch_size=10', '--lr=0.05',
                            f'--result={d}/r.json'], capture_output=True, text=True)
      self.assertNotEqual(run.returncode, 0)
      self.assertIn('num_examples is 60000', run.stderr)

  def test_fedavg_weights_by_examples(self):
    script = ('import sys, torch; sys.path.insert(0, sys.argv[1]); import fl_torch; '
              'a = {"w": torch.tensor([1.0, 0.0])}; b = {"w": torch.tensor([5.0, 4.0])}; '
              'print(fl_torch.weighted_average([a, b], [1, 3])["w"].tolist())')
    out = subprocess.run([TORCH_PYTHON, '-c', script, HERE], check=True, capture_output=True,
                         text=True).stdout
    self.assertEqual(json.loads(out), [4.0, 3.0])


class TableTest(unittest.TestCase):

  def row(self, system, run, wall, cpu=10.0, mib=100.0, acc=0.8, code=0):
    return dict(workload='quickstart', system=system, run=run, returncode=code, wall_s=wall,
                cpu_s=cpu, peak_mib=mib, accuracy=acc, processes=1)

  def test_medians_ranges_and_ratios_to_fedkit(self):
    rows = [self.row('fedkit', 1, 10.0), self.row('fedkit', 2, 12.0), self.row('fedkit', 3, 11.0),
            self.row('flower', 1, 30.0, mib=400.0), self.row('flower', 2, 36.0, mib=400.0),
            self.row('flower', 3, 0.0, code=1)]
    cells = compare.summarize(rows)
    self.assertEqual(cells[('quickstart', 'fedkit')]['wall_s'], (11.0, 10.0, 12.0))
    self.assertEqual(cells[('quickstart', 'flower')]['wall_s'], (33.0, 30.0, 36.0))
    text = compare.table(rows)
    flower = [l for l in text.splitlines() if '| flower |' in l][0]
    self.assertIn('| 2 of 3 |', flower)
    self.assertIn('33.0 [30.0, 36.0]', flower)
    self.assertIn('| 3.00x |', flower)  # 33 / 11
    self.assertIn('| 4.00x |', flower)  # memory 400 / 100

  def test_one_core_rows_are_compared_with_fedkit_on_one_core(self):
    rows = [self.row('fedkit', 1, 10.0), self.row('fedkit_one_core', 1, 20.0),
            self.row('plain_one_core', 1, 30.0)]
    plain = [l for l in compare.table(rows).splitlines() if 'plain_one_core' in l][0]
    self.assertIn('| 1.50x |', plain)

  def test_accuracy_from_fedkit_metrics_and_from_a_peer(self):
    with tempfile.TemporaryDirectory() as d:
      metrics = os.path.join(d, 'metrics.csv')
      with open(metrics, 'w') as f:
        f.write('round,test_accuracy,test_loss\n1,0.5,1.0\n2,0.75,0.5\n3,,\n')
      self.assertEqual(compare.final_accuracy(metrics), 0.75)
      peer = os.path.join(d, 'result.json')
      with open(peer, 'w') as f:
        json.dump({'accuracy': 0.625}, f)
      self.assertEqual(compare.final_accuracy(peer), 0.625)

  def test_the_one_core_commands_are_pinned_and_single_threaded(self):
    tools = dict(run_experiment='/x/run_experiment', spec='/x/spec', python='/usr/bin/python3',
                 flower_python='/v/python', workspace='/x')
    with tempfile.TemporaryDirectory() as d:
      cmd, result = compare.command('fedkit_one_core', 'many_clients', tools, d, '/data', '/p.json')
      self.assertEqual(cmd[:3], ['taskset', '-c', '0'])
      self.assertIn('workers: 1 threads_per_worker: 1', cmd[-1])
      self.assertIn('num_clients: 1000', cmd[-1])
      self.assertTrue(result.endswith('metrics.csv'))
      cmd, _ = compare.command('plain_one_core', 'quickstart', tools, d, '/data', '/p.json')
      self.assertEqual(cmd[:3], ['taskset', '-c', '0'])
      self.assertIn('--threads=1', cmd)
      cmd, _ = compare.command('flower', 'quickstart', tools, d, '/data', '/p.json')
      self.assertNotIn('taskset', cmd)
      with open(os.path.join(d, 'config.json')) as f:
        self.assertEqual(json.load(f)['num_clients'], 100)


if __name__ == '__main__':
  unittest.main()
