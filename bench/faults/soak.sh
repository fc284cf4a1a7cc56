#!/bin/sh
# The fault matrix (tests/integration/test_fault_matrix.py) as a longer soak,
# run by hand: more records per program, a higher rate, several rounds, and
# snarflog's default -maxblock (1 s). Every row is still checked exactly
# (delivered + gap counts == written, gaps in place, the telemonitor's
# counts equal to what the tool saw); the table it prints (longest write()
# per row) is what docs/PERFORMANCE.md quotes.
#   bench/faults/soak.sh [BUILD_DIR]     (default build)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
export CMON_BUILD_DIR="$build" CMON_SOURCE_DIR="$src" PYTHONDONTWRITEBYTECODE=1
export CMON_MATRIX_COUNT="${CMON_MATRIX_COUNT:-100000}"
export CMON_MATRIX_RATE="${CMON_MATRIX_RATE:-40000}"
export CMON_MATRIX_MAXBLOCK="${CMON_MATRIX_MAXBLOCK:-1}"
export CMON_MATRIX_PAUSE="${CMON_MATRIX_PAUSE:-2}"
export CMON_MATRIX_ROUNDS="${CMON_MATRIX_ROUNDS:-3}"
echo "soak: $(date -u +%FT%TZ) on $(nproc) CPUs; $CMON_MATRIX_COUNT records/program at" \
     "$CMON_MATRIX_RATE/s, -maxblock $CMON_MATRIX_MAXBLOCK, $CMON_MATRIX_ROUNDS rounds"
exec python3 "$src/tests/integration/test_fault_matrix.py"
