#!/bin/sh
# make demo — show CMon working end to end on this machine.
#   scripts/demo.sh BUILD_DIR
# Checks the example specification (config/examples/fsread.pspec, the
# report's Figure 3 plus per-minute statistics) against a sample log and
# shows a real assertion failure with its offending intervals.
set -eu
B=$(cd "${1:-build}" && pwd)
TOP=$(cd "$(dirname "$0")/.." && pwd)
EX=$TOP/config/examples
PCHECK=$B/clients/pcheck/pcheck

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "The specification: $EX/fsread.pspec"
sed -n '/^perfspec/,$p' "$EX/fsread.pspec"

say "pcheck -f -s fsread.pspec fsread-sample.log   (failures only)"
"$PCHECK" -f -s "$EX/fsread.pspec" "$EX/fsread-sample.log" | cut -c1-220 || true
say "The same as JSON Lines, as the telemonitor stores it (first 3 lines)"
"$PCHECK" -f --json -s "$EX/fsread.pspec" "$EX/fsread-sample.log" | head -3 || true
echo
echo "pcheck exit status: 1 means some assertion failed (0: all held, 2: spec error, 3: bad log)."
