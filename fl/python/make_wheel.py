"""Packs the fedkit Python package into a wheel for the Python and torch it was built for.

  make_wheel.py --module=_fedkit.so --init=fedkit/__init__.py --out=fedkit-<version>-<tags>.whl

Writes that wheel (PEP 427; the name must be the one its contents make) holding:
  fedkit/__init__.py, fedkit/_fedkit.so, and fedkit/_libs/: the shared libraries the
  extension needs that are neither torch's nor the C and C++ runtimes (Debian's Abseil,
  glog, Protobuf, ...), so that it imports in a virtual environment on a machine without
  them. The extension's RPATH is $ORIGIN/_libs then $ORIGIN/../torch/lib: torch's own
  libraries come from the torch installed beside it, which the wheel requires at the
  exact version it was built against (the C++ ABI of torch changes between releases).

The tags are those of the Python that runs this script: Bazel runs it with the Python
of the build (third_party/system_libs.bzl), the one the extension was compiled for.
"""

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

from tools import elf_deps

def torch_requirement(torch_version):
  """`torch==X.Y.Z` (local label dropped: 2.11.0+cu130 and 2.11.0+cpu share the C++ ABI)."""
  return 'torch==' + torch_version.split('+')[0]


def record_line(path, data):
  digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
  return [path, f'sha256={digest}', str(len(data))]


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--module', required=True, help='the built _fedkit.so')
  parser.add_argument('--init', required=True, help="the package's __init__.py")
  parser.add_argument('--out', required=True, help='the wheel file to write')
  args = parser.parse_args()
  # This Python's torch is the one the extension was built against (Bazel runs this
  # script with the build's Python).
  import torch  # pylint: disable=import-outside-toplevel

  with open(args.init) as f:
    version = re.search(r"^__version__ = '([^']+)'", f.read(), re.M).group(1)
  tag = f'cp{sys.version_info.major}{sys.version_info.minor}'
  platform = sysconfig.get_platform().replace('-', '_').replace('.', '_')
  dist_info = f'fedkit-{version}.dist-info'
  name = f'fedkit-{version}-{tag}-{tag}-{platform}.whl'
  if os.path.basename(args.out) != name:
    raise SystemExit(f'make_wheel: this wheel is {name}, not {os.path.basename(args.out)} '
                     '(fl/python/BUILD names it from FEDKIT_VERSION and @python3//:defs.bzl)')

  files = {}  # path in the wheel -> bytes
  with open(args.init, 'rb') as f:
    files['fedkit/__init__.py'] = f.read()
  with tempfile.TemporaryDirectory() as tmp:
    module = os.path.join(tmp, '_fedkit.so')
    shutil.copyfile(args.module, module)
    os.chmod(module, 0o755)
    for name, path in sorted(elf_deps.carried_libraries(args.module).items()):
      copy = os.path.join(tmp, name)
      shutil.copyfile(path, copy)
      os.chmod(copy, 0o755)
      subprocess.run(['patchelf', '--set-rpath', '$ORIGIN', copy], check=True)
      with open(copy, 'rb') as f:
        files[f'fedkit/_libs/{name}'] = f.read()
    subprocess.run(['patchelf', '--set-rpath', '$ORIGIN/_libs:$ORIGIN/../torch/lib', module],
                   check=True)
    with open(module, 'rb') as f:
      files['fedkit/_fedkit.so'] = f.read()

  files[f'{dist_info}/METADATA'] = (
      'Metadata-Version: 2.1\n'
      'Name: fedkit\n'
      f'Version: {version}\n'
      'Summary: Federated learning research framework: a C++ engine over LibTorch\n'
      f'Requires-Python: =={sys.version_info.major}.{sys.version_info.minor}.*\n'
      f'Requires-Dist: {torch_requirement(torch.__version__)}\n').encode()
  files[f'{dist_info}/WHEEL'] = (
      'Wheel-Version: 1.0\n'
      'Generator: fedkit make_wheel.py\n'
      'Root-Is-Purelib: false\n'
      f'Tag: {tag}-{tag}-{platform}\n').encode()
  record = io.StringIO()
  writer = csv.writer(record, lineterminator='\n')
  for path in sorted(files):
    writer.writerow(record_line(path, files[path]))
  writer.writerow([f'{dist_info}/RECORD', '', ''])
  files[f'{dist_info}/RECORD'] = record.getvalue().encode()

  with zipfile.ZipFile(args.out, 'w', zipfile.ZIP_DEFLATED) as wheel:
    for path in files:  # dist-info last, as PEP 427 recommends
      info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
      info.external_attr = (0o755 if path.endswith('.so') else 0o644) << 16
      info.compress_type = zipfile.ZIP_DEFLATED
      wheel.writestr(info, files[path])


if __name__ == '__main__':
  main()
