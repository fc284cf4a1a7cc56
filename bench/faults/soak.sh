#!/bin/sh
# The fault matrix (tests/integration/test_fault_matrix.py) as a longer soak,
# run by hand: more records per program, a higher rate, several rounds, and
# snarflog's default -maxblock (1 s). Every row is still checked exactly
# (delivered + gap counts == written, gaps in place, the telemonitor's
# counts equal to what the tool saw, every failure of the checker stored or
# its records counted unchecked); the table it prints (longest write() per
# row) is what docs/PERFORMANCE.md quotes.
#
# Then the production shapes of tests/integration/test_burst.py, each
# checked record by record and failure by failure: unpaced bursts of 100
# and 200 programs x 20,000 records through a class with a tool and a
# checker (BURST_ROUNDS times each), and 600 programs x 1,000 records/s.
#   bench/faults/soak.sh [BUILD_DIR]     (default build)
#   SOAK=matrix|burst|paced|all (default all); BURST_ROUNDS (default 10)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
export CMON_BUILD_DIR="$build" CMON_SOURCE_DIR="$src" PYTHONDONTWRITEBYTECODE=1
what=${SOAK:-all}
rounds=${BURST_ROUNDS:-10}

if [ "$what" = all ] || [ "$what" = matrix ]; then
    export CMON_MATRIX_COUNT="${CMON_MATRIX_COUNT:-100000}"
    export CMON_MATRIX_RATE="${CMON_MATRIX_RATE:-40000}"
    export CMON_MATRIX_MAXBLOCK="${CMON_MATRIX_MAXBLOCK:-1}"
    export CMON_MATRIX_PAUSE="${CMON_MATRIX_PAUSE:-2}"
    export CMON_MATRIX_ROUNDS="${CMON_MATRIX_ROUNDS:-3}"
    export CMON_MATRIX_STALL_BOUND=1     # fail on a program held up beyond its fault
    echo "soak: $(date -u +%FT%TZ) on $(nproc) CPUs; $CMON_MATRIX_COUNT records/program at" \
         "$CMON_MATRIX_RATE/s, -maxblock $CMON_MATRIX_MAXBLOCK, $CMON_MATRIX_ROUNDS rounds"
    python3 "$src/tests/integration/test_fault_matrix.py"
fi
if [ "$what" = all ] || [ "$what" = burst ]; then
    for n in 100 200; do
        i=1
        while [ "$i" -le "$rounds" ]; do
            echo "soak: $(date -u +%FT%TZ) burst $n x 20000 unpaced, round $i of $rounds"
            CMON_BURST_STREAMS=$n CMON_BURST_COUNT=20000 \
                python3 "$src/tests/integration/test_burst.py"
            i=$((i + 1))
        done
    done
fi
if [ "$what" = all ] || [ "$what" = paced ]; then
    echo "soak: $(date -u +%FT%TZ) 600 programs x 1000 records/s, 20 s"
    CMON_BURST_STREAMS=600 CMON_BURST_COUNT=20000 CMON_BURST_PACE=0.1 \
        python3 "$src/tests/integration/test_burst.py"
fi
