#!/bin/sh
# Screenshots of the dashboard's pages for the docs (docs/http.md,
# Dashboard, Screenshots): a registry and a telemonitor with the tests'
# sample data (the Lectern example and an fsread run, as in
# tests/integration/test_telemon_dashboard_pages.py, which this runs with
# CMON_SCREENSHOTS set), then headless chromium saves
#   OUTDIR/dashboard.png  /
#   OUTDIR/instance.png   /instances/ID
#   OUTDIR/failure.png    /failures/ID (a slow read)
#   scripts/screenshots.sh BUILD_DIR OUTDIR
# Needs a built tree (cmake --build BUILD_DIR) and /usr/bin/chromium.
set -eu

die() { echo "screenshots: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: scripts/screenshots.sh BUILD_DIR OUTDIR"
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such build directory"
[ -x "$build/daemons/telemonitor/telemonitor" ] || die "$build: no telemonitor built there"
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is missing (scripts/deps.sh, or apt-get install chromium)"
mkdir -p "$2"
out=$(cd "$2" && pwd)

CMON_BUILD_DIR=$build CMON_SOURCE_DIR=$src CMON_SCREENSHOTS=$out PYTHONDONTWRITEBYTECODE=1 \
	python3 "$src/tests/integration/test_telemon_dashboard_pages.py" ||
	die "the test run that takes them failed (exit $?)"
ls -l "$out"/dashboard.png "$out"/instance.png "$out"/failure.png
