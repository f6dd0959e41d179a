"""The shared libraries a binary brings along to another machine: what it needs,
directly or through another such library, that is neither torch's (the machine's own
torch provides those, with CUDA's) nor the C and C++ runtimes. Used by the Python
wheel (fl/python/make_wheel.py) and the GPU archive (tools/device_build/pack.sh).

  python3 tools/elf_deps.py BINARY...   # prints "soname resolved-path", one a line
"""

import os
import re
import subprocess
import sys

# Every Linux provides these; the interpreter provides libpython.
_SYSTEM = re.compile(r'^(ld-linux.*|libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+|'
                     r'libpython[0-9.]+)\.so')
# torch's own libraries, and CUDA's, which torch's RPATH finds beside it.
_TORCH = re.compile(r'^(lib(torch|c10|shm|caffe2)[a-z_]*|libcuda.*|libcu[a-z]+|libnv[a-z_]+|'
                    r'libnccl|libgomp)\.so')


def needed(path):
  """The DT_NEEDED names of the ELF file at `path`."""
  out = subprocess.run(['patchelf', '--print-needed', path], check=True, capture_output=True,
                       text=True).stdout
  return out.split()


def carried_libraries(binary):
  """{soname: resolved path} of what `binary` needs beyond torch and the system."""
  resolved = {}
  for line in subprocess.run(['ldd', binary], check=True, capture_output=True,
                             text=True).stdout.splitlines():
    match = re.match(r'\s*(\S+) => (\S+) \(0x', line)
    if match:
      resolved[match.group(1)] = os.path.realpath(match.group(2))
    elif 'not found' in line:
      raise SystemExit(f'elf_deps: {binary} needs {line.strip()}')
  found, queue = {}, needed(binary)
  while queue:
    name = queue.pop()
    if name in found or _SYSTEM.match(name) or _TORCH.match(name):
      continue
    found[name] = resolved[name]
    queue.extend(needed(found[name]))
  return found


if __name__ == '__main__':
  carried = {}
  for binary in sys.argv[1:]:
    carried.update(carried_libraries(binary))
  print('\n'.join(f'{soname} {path}' for soname, path in sorted(carried.items())))
