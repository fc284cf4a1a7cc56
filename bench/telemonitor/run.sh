#!/bin/sh
# bench/telemonitor/run.sh BUILD_DIR — the telemonitor's targets, side by side:
#   1. store writes: failures/s through the service's store (JSON report
#      parsed by sqlite, one commit per 100 ms) vs one commit per failure on
#      the same database vs a naive default sqlite database (INSERT per
#      failure)                                  target: batched >= 20,000/s
#   2. latency: from writing a slow read into a monitored program's log to
#      the failure being queryable with telemonctl (median and max of
#      TRIALS)                                   target: < 1 s
#   3. 200 instances at once, each under its own snarflog, each checked by
#      its own pcheck (class with block TRUE): every record arrives, none
#      lost; throughput, and the same 200 logs checked offline by pcheck
#      (2 at a time) as the reference           target: no loss
#   4. capacity (ramp.py, issue 34): N streams x 999 records/s through one
#      telemonitor, N in RAMP (default "100 300 500 1000"), a checker per
#      stream beside a tool that only counts bytes: exactness, failure
#      latency, CPU per record, memory per stream, the knee
#   5. a program whose tool never reads (stalled.py) beside `cat`
# Repeated REPS times where cheap; medians. Environment: REPS (default 3),
# INSTANCES (200), READS (reads per instance, 20000), TRIALS (20).
set -eu
B=$(cd "${1:-build-bench}" && pwd)
REPS=${REPS:-3}
INSTANCES=${INSTANCES:-200}
READS=${READS:-20000}
TRIALS=${TRIALS:-20}
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SPEC=$TOP/config/examples/fsread.pspec
STORE=$B/bench/bench_tm_store
WRITER=$B/bench/bench_tm_writer
REG=$B/daemons/registry/telemonreg
TM=$B/daemons/telemonitor/telemonitor
CTL=$B/clients/telemonctl/telemonctl
SNARF=$B/daemons/snarflog/snarflog
PCHECK=$B/clients/pcheck/pcheck
W=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# --- 1. store ---------------------------------------------------------------------
: > "$W/batched"; : > "$W/auto"; : > "$W/naive"
i=0
while [ $i -lt "$REPS" ]; do
    for m in batched:200000:batched autocommit:50000:auto naive:2000:naive; do
        mode=${m%%:*}; rest=${m#*:}; n=${rest%%:*}; f=${rest#*:}
        rm -rf "$W/db"; mkdir "$W/db"
        "$STORE" "$W/db" "$mode" "$n" 2>/dev/null | awk '{ print $4 }' >> "$W/$f"
    done
    i=$((i + 1))
done
SB=$(median < "$W/batched"); SA=$(median < "$W/auto"); SN=$(median < "$W/naive")
echo "1. store writes (failure report parsed + stored), medians of $REPS runs"
printf '   %-52s %12s\n' "" "failures/s"
printf '   %-52s %12s\n' "telemonitor store, one commit per 100 ms (batched)" "$SB"
printf '   %-52s %12s\n' "same database, one commit per failure" "$SA"
printf '   %-52s %12s\n' "default sqlite database, INSERT per failure" "$SN"
printf '   batched vs per-failure commit: %.1fx; vs naive: %.0fx (target >= 20,000/s: %s)\n' \
    "$(echo "$SB / $SA" | bc -l)" "$(echo "$SB / $SN" | bc -l)" \
    "$([ "$SB" -ge 20000 ] && echo met || echo MISSED)"

# --- the service ------------------------------------------------------------------
"$REG" -listen 127.0.0.1:0 -portfile "$W/reg.port" 2>"$W/reg.err" &
pids="$! $pids"
while [ ! -s "$W/reg.port" ]; do sleep 0.05; done
R=127.0.0.1:$(cat "$W/reg.port")
cat > "$W/rc" <<EOF
(class (prog "*") (spec "$SPEC") (auto TRUE) (block TRUE))
EOF
"$TM" -rc "$W/rc" -state "$W/state" -regmachine "$R" -pcheck "$PCHECK" 2>"$W/tm.err" &
TMPID=$!
pids="$TMPID $pids"
export TELEMON_STATE="$W/state"
until "$CTL" status >/dev/null 2>&1; do sleep 0.05; done

# --- 2. latency -------------------------------------------------------------------
"$SNARF" fsreadlat -regmachine "$R" -- "$WRITER" -latency "$W/state" -prog fsreadlat \
    -trials "$TRIALS" > "$W/lat" 2>"$W/lat.err"
LM=$(median < "$W/lat"); LX=$(sort -n "$W/lat" | tail -n 1)
echo
echo "2. failure latency: slow read written -> failure queryable (telemonctl), $TRIALS trials"
printf '   median %s ms, max %s ms (target < 1000 ms: %s)\n' "$LM" "$LX" \
    "$(echo "$LX < 1000" | bc -l | sed 's/1/met/; s/0/MISSED/')"

# --- 3. many instances --------------------------------------------------------------
cpu_of() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
C0=$(cpu_of "$TMPID")
(max=0; while [ ! -e "$W/done" ]; do
    n=$("$CTL" status --json 2>/dev/null | sed -n 's/.*"monitored":\([0-9]*\).*/\1/p')
    [ -n "$n" ] && [ "$n" -gt "$max" ] && max=$n && echo "$max" > "$W/maxmon"
    sleep 0.2
done) &
SAMPLER=$!
T0=$(date +%s.%N)
i=0
while [ $i -lt "$INSTANCES" ]; do
    "$SNARF" fsread -regmachine "$R" -- "$WRITER" -reads "$READS" -slow-every 500 \
        2>>"$W/snarf.err" &
    i=$((i + 1))
done
wait_ended() {
    "$CTL" instances --all --json | python3 -c '
import json, sys
inst = [i for i in json.load(sys.stdin) if i["prog"] == "fsread"]
print(sum(i["state"] in ("ended", "gone") for i in inst))'
}
until [ "$(wait_ended)" -ge "$INSTANCES" ]; do sleep 0.2; done
T1=$(date +%s.%N)
touch "$W/done"; wait "$SAMPLER" 2>/dev/null || true
C1=$(cpu_of "$TMPID")
HWM=$(awk '/VmHWM/ { print $2 }' "/proc/$TMPID/status")
"$CTL" instances --all --json > "$W/inst.json"
"$CTL" failures --prog fsread --limit 100000 --json > "$W/fail.json"
SUMMARY=$(python3 - "$W/inst.json" "$W/fail.json" "$READS" <<'EOF'
import json, sys
inst = [i for i in json.load(open(sys.argv[1])) if i["prog"] == "fsread"]
fails = json.load(open(sys.argv[2]))
want = 3 * int(sys.argv[3])
complete = sum(i["records"] == want for i in inst)
print(len(inst), complete, sum(i["records"] for i in inst), sum(i["lost"] for i in inst),
      sum(i["skipped"] for i in inst), len(fails))
EOF
)
set -- $SUMMARY
N=$1; COMPLETE=$2; RECS=$3; LOST=$4; SKIPPED=$5; FAILS=$6
WALL=$(echo "$T1 - $T0" | bc -l)
TMCPU=$(echo "($C1 - $C0) / $(getconf CLK_TCK)" | bc -l)

# reference: the same logs checked offline, two pcheck at a time
CMON_LOG="$W/one.log" "$WRITER" -reads "$READS" -slow-every 500
O0=$(date +%s.%N)
seq "$INSTANCES" | xargs -P 2 -I{} sh -c "\"$PCHECK\" -cont --json -s \"$SPEC\" \"$W/one.log\" >/dev/null || true"
O1=$(date +%s.%N)
OFF=$(echo "$O1 - $O0" | bc -l)

echo
echo "3. $INSTANCES instances at once, $READS reads ($((3 * READS)) records) each, block TRUE"
printf '   instances seen %s, complete %s, records %s, lost %s, skipped %s, failures %s (expected %s)\n' \
    "$N" "$COMPLETE" "$RECS" "$LOST" "$SKIPPED" "$FAILS" "$((INSTANCES * (READS / 500)))"
printf '   most monitored at once: %s\n' "$(cat "$W/maxmon" 2>/dev/null || echo ?)"
printf '   wall %.2f s, %.0f records/s through snarflog -> telemonitor -> pcheck -> store\n' \
    "$WALL" "$(echo "$RECS / $WALL" | bc -l)"
printf '   telemonitor: %.2f s CPU (%.2f us per record), peak RSS %s KiB\n' \
    "$TMCPU" "$(echo "$TMCPU * 1000000 / $RECS" | bc -l)" "$HWM"
printf '   reference, the same logs checked offline by pcheck, 2 at a time: %.2f s (pipeline %.2fx)\n' \
    "$OFF" "$(echo "$WALL / $OFF" | bc -l)"
printf '   no loss with block: %s\n' \
    "$([ "$LOST" -eq 0 ] && [ "$COMPLETE" -eq "$INSTANCES" ] && [ "$SKIPPED" -eq 0 ] && echo met || echo MISSED)"

echo
echo "4. capacity: the N-stream ramp (bench/telemonitor/ramp.py)"
python3 "$TOP/bench/telemonitor/ramp.py" "$B"
echo
echo "5. a program whose monitoring nobody consumes (bench/telemonitor/stalled.py)"
python3 "$TOP/bench/telemonitor/stalled.py" "$B" 2>/dev/null
