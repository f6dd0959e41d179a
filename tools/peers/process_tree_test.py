"""process_tree measures the whole tree: memory held by a child, and by a
grandchild whose parent has already left, and CPU spent outside the root."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import process_tree  # pylint: disable=wrong-import-position

MIB = 2**20

# Holds `mib` MiB of touched memory for `seconds`.
HOLD = ('import sys, time; b = bytearray({mib} * 2**20); '
        '[b.__setitem__(i, 1) for i in range(0, len(b), 4096)]; time.sleep({seconds})')
# Spends about `seconds` of CPU.
BURN = 'import time; t = time.process_time(); exec("while time.process_time() - t < {seconds}: pass")'


class ProcessTreeTest(unittest.TestCase):

  def measure(self, script):
    with tempfile.TemporaryFile() as log:
      return process_tree.measure([sys.executable, '-c', script], log, interval=0.05)

  def test_a_childs_memory_and_cpu_count(self):
    script = ('import subprocess, sys; '
              f'c = subprocess.Popen([sys.executable, "-c", {HOLD.format(mib=200, seconds=1.5)!r}]); '
              f'subprocess.run([sys.executable, "-c", {BURN.format(seconds=0.6)!r}]); c.wait()')
    m = self.measure(script)
    self.assertEqual(m.returncode, 0)
    self.assertGreaterEqual(m.peak_pss_bytes, 190 * MIB)
    self.assertLess(m.peak_pss_bytes, 400 * MIB)
    self.assertGreaterEqual(m.cpu_s, 0.55)
    self.assertGreaterEqual(m.processes, 3)
    self.assertGreaterEqual(m.wall_s, 1.5)

  def test_an_orphaned_grandchild_still_counts(self):
    # The middle process starts the holder and exits at once: the holder is
    # re-parented away from the tree and found by its session.
    middle = (f'import subprocess, sys; subprocess.Popen([sys.executable, "-c", '
              f'{HOLD.format(mib=150, seconds=2.0)!r}])')
    script = (f'import subprocess, sys, time; subprocess.run([sys.executable, "-c", {middle!r}]); '
              'time.sleep(2.5)')
    m = self.measure(script)
    self.assertGreaterEqual(m.peak_pss_bytes, 140 * MIB)

  def test_the_exit_status_is_the_commands(self):
    self.assertEqual(self.measure('import sys; sys.exit(3)').returncode, 3)


if __name__ == '__main__':
  unittest.main()
