#!/usr/bin/env bash
# Regenerates docs/report-screenshot.png: three policies on the trident-fragmented scenario, with
# the physical-memory map, reported and rendered in headless Chromium (docs/RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
SP=${SP:-.venv/bin/superpager}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in "" "--policy base" "--policy trident:scan_sleep_ms=10,alloc_sleep_ms=10"; do
  # shellcheck disable=SC2086
  "$SP" simulate --scenario trident-fragmented $p --map-every 4M --map-region 32MiB --db "$work/demo.duckdb" > /dev/null
done
"$SP" report --db "$work/demo.duckdb" -o "$work/report" --title "trident-fragmented: linux-thp, base and trident"
.venv/bin/python - "$work/report/index.html" <<'PY'
import sys
from superpager import report
dom, console = report.open_in_browser(sys.argv[1], screenshot="docs/report-screenshot.png", height=3400)
assert not console, console
print("wrote docs/report-screenshot.png")
PY
