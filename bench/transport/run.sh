#!/bin/sh
# bench/transport/run.sh BUILD_DIR [--quick] [--writer-only] [--idle-control] [--placement]
#   [--baseline SNARFLOG] — snarflog and telemonreg
# against cat, socat and rsyslog, side by side; prints medians and ratios.
HERE=$(cd "$(dirname "$0")" && pwd)
exec python3 "$HERE/bench.py" "$@"
