#!/bin/bash
# The GPU check, run from an unpacked archive of tools/device_build/pack.sh on a
# machine with a GPU and a Python holding torch 2.11.0 (the lent machine's
# /opt/torch/.venv), compiling nothing:
#   1. the tests that take a device: fl/device_test and fl/device_parity_test (one
#      client's local epoch on CUDA against CPU; a skip is a failure here);
#   2. a spec with device: CUDA where no GPU is visible (CUDA_VISIBLE_DEVICES="") is
#      a clear error, not a crash;
#   3. the quickstart (Fashion-MNIST, MLP, FedAvg, 100 rounds) with device: CUDA and
#      with device: CPU, for accuracy and time per round;
#   4. a CIFAR-shaped workload: LeNet-5 (5 rounds) and ResNet-18-GN (3 rounds) on
#      synthetic 32x32x3 images, 100 clients, 10 a round;
#   5. fedkit's local step (tools:local_step_benchmark --device=cuda) and the same
#      models by plain PyTorch eager in that machine's Python (eager_peer.py), with
#      peak GPU memory (nvidia-smi sampled every 100 ms, and torch's own counter);
#   6. the fedkit wheel in wheels/ (if its Python tag fits the Python): a run from
#      Python with device: CUDA.
# Everything goes to OUT (summary.md first); the exit status is non-zero if any step
# failed, and every step runs regardless.
#
#   gpu_check.sh [--out=DIR] [--python=PY] [--dry-run]
#     --python: default /opt/torch/.venv/bin/python3
#     --dry-run: on this CPU machine, every step with device: CPU and small sizes, so
#                CI checks that the script and archive work (tools/test_torch2.sh).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$PWD/gpu_check_out"
python=/opt/torch/.venv/bin/python3
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#--out=}" ;;
    --python=*) python="${arg#--python=}" ;;
    --dry-run) dry_run=1 ;;
    *) echo "gpu_check: unknown argument $arg" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root"
failures=()
step() { echo "== $*" | tee -a "$out/steps.log"; }
failed() { failures+=("$1"); echo "FAILED: $1" | tee -a "$out/steps.log"; }

torch_lib="$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')" || {
  echo "gpu_check: $python cannot import torch" >&2
  exit 1
}
export LD_LIBRARY_PATH="$root/lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GLOG_logtostderr=1
if [[ $dry_run -eq 1 ]]; then
  device=CPU; torch_device=cpu; rounds=3; cifar_train=2000; cifar_test=500; resnet_rounds=1
  data_limit='train_limit: 6000 test_limit: 1000'
else
  device=CUDA; torch_device=cuda; rounds=100; cifar_train=50000; cifar_test=10000; resnet_rounds=3
  data_limit=''
fi

step "the machine"
{
  echo "dry_run: $dry_run"
  cat MANIFEST
  echo "python: $python"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(),
    torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  else
    echo "nvidia-smi: not here"
  fi
  echo "cpu cores: $(nproc)"
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

# Samples the GPU's used memory every 100 ms into $out/memory_<name>.csv while the
# command runs (nothing without nvidia-smi).
with_memory() {
  local name="$1" sampler=""
  shift
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$out/memory_$name.csv" &
    sampler=$!
  fi
  "$@"
  local code=$?
  [[ -z "$sampler" ]] || kill "$sampler" 2> /dev/null
  return $code
}

step "0. every library the binaries load comes from the archive, torch or the C/C++ runtime"
# (On this CPU machine Debian's own copies would be found too, hiding a missing one.)
strays=$(ldd bin/* | awk '/=>/ {print $1, $3}' | sort -u |
  grep -vE "^(ld-linux|libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+)\.so" |
  grep -vE " ($root/lib/|$(dirname "$torch_lib")/|$(dirname "$(dirname "$torch_lib")")/nvidia/)" || true)
if [[ -n "$strays" ]]; then
  echo "$strays" | tee "$out/stray_libraries.txt"
  failed "libraries from outside the archive and torch: $(echo "$strays" | awk '{print $1}' | tr '\n' ' ')"
fi

step "1. tests that take a device"
for test in device_test device_parity_test; do
  bin/$test --gtest_output="xml:$out/$test.xml" > "$out/$test.log" 2>&1 || failed "$test"
  if [[ $dry_run -eq 0 ]] && grep -q "\[  SKIPPED \]" "$out/$test.log"; then
    failed "$test skipped a case on the GPU machine"
  fi
done
grep -h "device_parity" "$out/device_parity_test.log" | tee -a "$out/steps.log"

step "2. device: CUDA with no GPU visible"
if CUDA_VISIBLE_DEVICES="" bin/run_experiment --spec=experiments/quickstart.textproto \
    --set='device: CUDA server { rounds: 1 }' --output_dir="$out/no_gpu" > "$out/no_gpu.log" 2>&1; then
  failed "device: CUDA without a visible GPU ran instead of failing"
elif ! grep -q "device: CUDA requested, but no CUDA device is usable" "$out/no_gpu.log"; then
  failed "device: CUDA without a visible GPU failed without the clear error"
fi

fashion="dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { dir: \"$root/data/fashion-mnist\" $data_limit } } }"
# The quickstart's accuracy after its rounds: chance is 0.1; 100 rounds reach about
# 0.85; the dry run's 3 rounds on 6,000 images about 0.33, where a model that does
# not train stays near 0.1.
min_accuracy=0.80
[[ $dry_run -eq 1 ]] && min_accuracy=0.25
final_accuracy() {
  "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["final_test_accuracy"])' \
    "$out/$1/summary.json" 2> /dev/null
}
devices=("$device")
[[ "$device" == CPU ]] || devices+=(CPU)
step "3. quickstart, device: ${devices[*]}, $rounds rounds"
for d in "${devices[@]}"; do
  name="quickstart_$(tr '[:upper:]' '[:lower:]' <<< "$d")"
  if with_memory "$name" bin/run_experiment --spec=experiments/quickstart.textproto \
      --set="device: $d server { rounds: $rounds } $fashion" --output_dir="$out/$name" \
      > "$out/$name.log" 2>&1; then
    accuracy=$(final_accuracy "$name")
    echo "$name: final test accuracy $accuracy" | tee -a "$out/steps.log"
    "$python" -c "import sys; sys.exit(not float('$accuracy') >= $min_accuracy)" ||
      failed "$name reached test accuracy $accuracy, below $min_accuracy"
  else
    failed "$name"
  fi
done
if [[ "$device" != CPU ]]; then
  # The same run on two devices: the arithmetic differs in the last bits and training
  # amplifies it, but not into a different result.
  "$python" -c "import sys; sys.exit(abs($(final_accuracy quickstart_cuda) - $(final_accuracy quickstart_cpu)) > 0.02)" ||
    failed "the quickstart's accuracy on CUDA and CPU differ by more than 0.02"
fi

step "4. CIFAR-shaped: synthetic 3x32x32, LeNet-5 and ResNet-18-GN"
cifar="$out/synthetic_cifar"
"$python" tools/device_build/synthetic_cifar.py --dir="$cifar" --train=$cifar_train --test=$cifar_test ||
  failed "synthetic_cifar.py"
cifar_set="device: $device dataset { options { [type.googleapis.com/fedkit.data.Cifar10Options] { dir: \"$cifar\" } } }"
with_memory cifar_lenet5 bin/run_experiment --spec=experiments/gpu/cifar_lenet5.textproto \
  --set="$cifar_set" --output_dir="$out/cifar_lenet5" > "$out/cifar_lenet5.log" 2>&1 ||
  failed "cifar_lenet5"
with_memory cifar_resnet18_gn bin/run_experiment --spec=experiments/gpu/cifar_lenet5.textproto \
  --set="$cifar_set name: \"cifar_resnet18_gn\" model { name: \"resnet18_gn\" } server { rounds: $resnet_rounds }" \
  --output_dir="$out/cifar_resnet18_gn" > "$out/cifar_resnet18_gn.log" 2>&1 || failed "cifar_resnet18_gn"

step "5. local step: fedkit and plain PyTorch eager on $torch_device"
min_time=1
[[ $dry_run -eq 1 ]] && min_time=0.05
with_memory fedkit_step bin/local_step_benchmark --device="$(tr '[:upper:]' '[:lower:]' <<< "$device")" \
  --benchmark_filter='^(floor|step)/(quickstart|lenet5_cifar)/' --benchmark_min_time=$min_time \
  --benchmark_format=json --benchmark_out="$out/fedkit_step.json" > "$out/fedkit_step.log" 2>&1 ||
  failed "local_step_benchmark"
"$python" -c 'import json, sys; sys.exit(len([b for b in json.load(open(sys.argv[1]))["benchmarks"]
                                            if "seconds_per_step" in b]) != 4)' "$out/fedkit_step.json" ||
  failed "local_step_benchmark did not time the four cases"
peer_args=(--device="$torch_device" --out="$out/eager_peer.json")
[[ $dry_run -eq 1 ]] && peer_args+=(--rounds=1 --repeats=1 --threads=1)
with_memory eager_peer "$python" tools/device_build/eager_peer.py "${peer_args[@]}" \
  > "$out/eager_peer.log" 2>&1 || failed "eager_peer.py"

step "6. the wheel from Python"
tag="$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
wheel="$(ls wheels/fedkit-*-"$tag"-*.whl 2> /dev/null | head -n 1)"
if [[ -z "$wheel" ]]; then
  echo "no wheel for $tag in wheels/" | tee "$out/wheel.log"
  failed "no fedkit wheel for $tag"
else
  site="$out/wheel_site"
  if "$python" -m pip install --quiet --no-deps --no-index --target="$site" "$wheel" > "$out/wheel.log" 2>&1; then
    PYTHONPATH="$site" "$python" - "$device" "$root" "$out/wheel_run" >> "$out/wheel.log" 2>&1 <<'EOF' || failed "the wheel's run"
import sys
import fedkit
device, root, out = sys.argv[1:]
spec = fedkit.load_spec(root + '/experiments/quickstart.textproto').with_overrides(
    'device: %s server { rounds: 3 } dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions]'
    ' { dir: "%s/data/fashion-mnist" train_limit: 6000 test_limit: 1000 } } }' % (device, root))
result = fedkit.run(spec, out, with_model=True)
tensor = next(iter(result.model.values()))
print('fedkit', fedkit.__file__, 'accuracy', result.rows[-1]['test_accuracy'], 'model on', tensor.device)
assert tensor.device.type == device.lower(), tensor.device
EOF
  else
    failed "pip install $wheel"
  fi
fi

step "summary"
"$python" tools/device_build/summarize.py "$out" > "$out/summary.md" || failed "summarize.py"
cat "$out/summary.md"
if [[ ${#failures[@]} -gt 0 ]]; then
  printf 'gpu_check: %d failed: %s\n' "${#failures[@]}" "$(IFS=';'; echo "${failures[*]}")" | tee -a "$out/steps.log"
  exit 1
fi
echo "gpu_check: every step passed" | tee -a "$out/steps.log"
