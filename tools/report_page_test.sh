#!/bin/bash
# The report pages in headless Chromium, as a user opens them: a run's page
# (tools/report on a run folder) and a sweep's page (the sweep tool's
# --report_only), both from the fixture results of
# tools/sweep/testdata/example.sweep.textproto in fl/report/testdata/example_sweep.
# Each page must load without a console message (the pages have no script, so
# any message is an error: an SVG attribute Chromium cannot parse, a resource it
# cannot load), its DOM must hold every curve's path with its points, and the
# screenshot must show the curves' colours. Bazel runs this in the runfiles root.
set -uo pipefail

chromium="/usr/bin/chromium"
python="/usr/bin/python3"
if [[ ! -x "$chromium" ]]; then
  echo "SKIPPED: chromium is not installed (tools/setup.sh installs it)"
  exit 0
fi
if ! "$python" -c "import numpy, PIL" 2> /dev/null; then
  echo "SKIPPED: /usr/bin/python3 cannot import numpy and PIL (tools/setup.sh installs" \
    "python3-matplotlib, which brings both)"
  exit 0
fi

report="$PWD/tools/report"
sweep="$PWD/tools/sweep/sweep"
sweep_file="$PWD/tools/sweep/testdata/example.sweep.textproto"
fixture="$PWD/fl/report/testdata/example_sweep"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# The fixture is read-only in the runfiles; the tools write into a copy.
out="$tmp/example_sweep"
rm -rf "$out"
cp -rL "$fixture" "$out"
chmod -R u+w "$out"

"$report" --run="$out/fedexp_seed1" > "$tmp/report.txt" 2>&1 ||
  { fail "tools/report exited $?"; cat "$tmp/report.txt"; }
"$sweep" --sweep="$sweep_file" --out="$out" --report_only > "$tmp/sweep.txt" 2>&1 ||
  { fail "the sweep's --report_only exited $?"; cat "$tmp/sweep.txt"; }

# Opens `page` in Chromium; writes $tmp/<name>.png, $tmp/<name>.dom and
# $tmp/<name>.log (Chromium's log, where console messages land).
browse() {
  local name="$1" page="$2"
  # Chromium keeps its profile, caches and crash reports under these.
  export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config" XDG_CACHE_HOME="$tmp/home/.cache"
  mkdir -p "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"
  local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr
    --v=0 --user-data-dir="$tmp/profile_$name" --window-size=1200,3000)
  timeout 120 "$chromium" "${flags[@]}" --screenshot="$tmp/$name.png" "file://$page" \
    > /dev/null 2> "$tmp/$name.log" || fail "$name: chromium --screenshot exited $?"
  timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$page" \
    > "$tmp/$name.dom" 2>> "$tmp/$name.log" || fail "$name: chromium --dump-dom exited $?"
  # Console messages are logged as '...:CONSOLE:<line>] "<message>", source: ...'.
  if grep -E ':CONSOLE(\(|:)|Uncaught' "$tmp/$name.log"; then
    fail "$name: the page logged the console messages above"
  fi
}

# The DOM's curves and the screenshot's pixels: every named series is a path
# with at least 2 points, and each colour covers enough pixels to be a line.
check() {
  local name="$1"
  shift
  "$python" - "$tmp/$name.dom" "$tmp/$name.png" "$@" << 'EOF' || fail "$name: see above"
import re
import sys

import numpy as np
from PIL import Image

dom_path, png_path, *expected = sys.argv[1:]
series = [name for name in expected if not name.startswith("#")]
colours = [name for name in expected if name.startswith("#")]
with open(dom_path, encoding="utf-8") as f:
  dom = f.read()
paths = {}
for match in re.finditer(r'<path class="series" data-series="([^"]*)" data-points="(\d+)"', dom):
  paths.setdefault(match.group(1), []).append(int(match.group(2)))
ok = True
for name in series:
  points = paths.get(name, [])
  if not points or min(points) < 2:
    print(f"no curve {name!r} with points in the DOM (curves: {paths})")
    ok = False
pixels = np.asarray(Image.open(png_path).convert("RGB")).astype(int)
for colour in colours:
  rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
  count = int((np.abs(pixels - rgb).max(axis=2) <= 10).sum())
  print(f"{png_path}: {count} pixels of {colour}")
  if count < 300:
    print(f"too few pixels of {colour}: the curves drawn in it do not show")
    ok = False
sys.exit(0 if ok else 1)
EOF
}

# The run's page: test accuracy in the palette's first colour, train loss in its second.
page="$out/fedexp_seed1/report.html"
if [[ -f "$page" ]]; then
  browse run "$page"
  check run "test accuracy" "test loss" "train loss" "eta_g" "seconds per round" \
    "#1f77b4" "#ff7f0e"
  grep -q '<svg class="heatmap" data-rows="4" data-columns="10"' "$tmp/run.dom" ||
    fail "run: no heatmap of 4 clients x 10 classes"
else
  fail "no $page"
fi

# The sweep's page: a curve per variant, in the first two colours, and a link to
# each run's page, which exists.
page="$out/report.html"
if [[ -f "$page" ]]; then
  browse sweep "$page"
  check sweep "FedAvg (2 seeds)" "FedExP (eps 0.1) (2 seeds)" "#1f77b4" "#ff7f0e"
  for run in fedavg_seed1 fedavg_seed2 fedexp_seed1 fedexp_seed2; do
    grep -q "<a href=\"$run/report.html\">" "$tmp/sweep.dom" || fail "sweep: no link to $run"
    [[ -f "$out/$run/report.html" ]] || fail "sweep: $run/report.html was not written"
  done
else
  fail "no $page"
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures failures; pages, screenshots and logs in $tmp"
  exit 1
fi
echo "PASS"
