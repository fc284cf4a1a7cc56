#!/bin/sh
# The fleet on a real PostgreSQL (tests/integration/test_fleet.py), as a
# benchmark and a soak, run by hand:
#   bench/fleet/run.sh [BUILD_DIR]
# 1. cost: 100 instances at 150 records/s on 3 telemonitors, 20 s of steady
#    state: PostgreSQL statements, commits and WAL bytes per instance per
#    second (pg_stat_statements, pg_current_wal_lsn), every stream checked;
# 2. soak: 500 programs starting together on 3 telemonitors, once on a
#    quiet machine and once beside two CPU-bound loops: none may move
#    between live nodes, every record and failure exact;
# 3. the fault scenarios with a 30 s SIGSTOP.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
export CMON_BUILD_DIR="$build" CMON_SOURCE_DIR="$src" PYTHONDONTWRITEBYTECODE=1
t="$src/tests/integration/test_fleet.py"
echo "fleet: $(date -u +%FT%TZ) on $(nproc) CPUs"
CMON_FLEET_ONLY=measure CMON_FLEET_PROGRAMS=${COST_PROGRAMS:-100} python3 "$t"
CMON_FLEET_ONLY=start CMON_FLEET_PROGRAMS=500 python3 "$t"
echo "fleet: the same beside two CPU-bound loops"
( timeout 300 sh -c 'while :; do :; done' & timeout 300 sh -c 'while :; do :; done' & wait ) &
busy=$!
CMON_FLEET_ONLY=start CMON_FLEET_PROGRAMS=500 python3 "$t"
kill $busy 2>/dev/null || true
pkill -f "while :; do :; done" 2>/dev/null || true
CMON_FLEET_ONLY=kill,stop,skew,pgrestart,join CMON_FLEET_STOP_S=30 python3 "$t"
