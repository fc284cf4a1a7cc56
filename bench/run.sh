#!/bin/sh
# bench/run.sh BUILD_DIR — run every benchmark (bench/*/run.sh) and print
# their tables. `make bench` builds an optimised tree first and calls this.
# The machines are shared: each benchmark repeats its measurements and
# reports medians and ratios measured side by side in one run.
set -u
B=$(cd "${1:-build-bench}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
status=0
for run in "$HERE"/*/run.sh; do
    [ -x "$run" ] || continue
    echo "== $(basename "$(dirname "$run")")  ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r))"
    "$run" "$B" || status=1
    echo
done
exit $status
