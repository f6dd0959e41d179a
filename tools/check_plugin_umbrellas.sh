#!/bin/bash
# Every plugin library (fl_plugin_library, tagged "fl_plugin") must be linked by its
# kind's umbrella target: //aggregators:all for those under aggregators/, and so on
# for data/ and models/. One that is not escapes the runner, the conformance and
# composition suites and the golden list without any test noticing. Run by
# tools/test.sh before the tests; exits 1 naming the strays.
set -uo pipefail
cd "$(dirname "$0")/.."

query() {
  bazel query --noshow_progress --ui_event_filters=-info,-debug "$1" 2>/dev/null
}

strays=""
for kind in aggregators data models; do
  if ! found=$(query "attr(tags, 'fl_plugin', //$kind/...) except deps(//$kind:all)"); then
    echo "check_plugin_umbrellas: bazel query failed for //$kind" >&2
    exit 1
  fi
  [[ -n "$found" ]] && strays+="$found (not in //$kind:all)"$'\n'
done
if ! found=$(query "attr(tags, 'fl_plugin', //...) except (//aggregators/... + //data/... + //models/...)"); then
  echo "check_plugin_umbrellas: bazel query failed" >&2
  exit 1
fi
[[ -n "$found" ]] && strays+="$found (outside aggregators/, data/ and models/, which hold the umbrellas)"$'\n'

if [[ -n "$strays" ]]; then
  echo "check_plugin_umbrellas: plugin libraries no umbrella links:" >&2
  printf '%s' "$strays" >&2
  exit 1
fi
echo "check_plugin_umbrellas: every plugin library is in its kind's umbrella"
