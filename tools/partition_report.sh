#!/bin/bash
# Reports how a spec partitions its training set: per-client sizes on stdout, and
# counts.csv, summary.txt and partition.png (clients x classes heatmap and a
# per-client size bar) in DIR:
#   bazel run //tools:partition_report -- --spec FILE.textproto --out DIR [--set FRAGMENT]
# Relative paths are relative to the folder bazel was run from. The picture needs
# /usr/bin/python3 with matplotlib (Debian's python3-matplotlib; tools/setup.sh
# installs it); without it the counts are still written.
set -euo pipefail

user_dir="${BUILD_WORKING_DIRECTORY:-$PWD}"
spec="" out="" set_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --spec) spec="$2"; shift 2 ;;
    --spec=*) spec="${1#--spec=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#--out=}"; shift ;;
    --set) set_args=(--set="$2"); shift 2 ;;
    --set=*) set_args=("$1"); shift ;;
    *) echo "usage: partition_report --spec FILE --out DIR [--set FRAGMENT]" >&2; exit 2 ;;
  esac
done
if [[ -z "$spec" || -z "$out" ]]; then
  echo "usage: partition_report --spec FILE --out DIR [--set FRAGMENT]" >&2
  exit 2
fi
[[ "$spec" = /* ]] || spec="$user_dir/$spec"
[[ "$out" = /* ]] || out="$user_dir/$out"

# The runfiles root when run by bazel; the script's folder's parent otherwise.
root="$PWD"
[[ -x "$root/tools/partition_counts" ]] || root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/partition_counts" --spec="$spec" --out="$out" "${set_args[@]}"

py=/usr/bin/python3
[[ -x "$py" ]] || py=python3
if "$py" -c "import matplotlib" 2>/dev/null; then
  "$py" "$root/tools/partition_report.py" "$out"
else
  echo "no matplotlib for $py: skipped partition.png (apt-get install python3-matplotlib)" >&2
fi
