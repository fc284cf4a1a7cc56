#!/bin/sh
# bench/http/run.sh BUILD_DIR — the telemonitor's HTTP API with a store as
# a long-running service has it (INSTANCES instances, FAILURES failures,
# filled through the store module by bench_http_fill), -http on loopback:
#   1. latency of GET /api/v1/failures?limit=100 and GET /metrics: N
#      sequential requests on one keep-alive connection (client.py), p50,
#      p99 and max; beside it what a user would run instead, telemonctl
#      failures --json --limit 100 (a process each time)
#   2. the loop is not blocked: a program under snarflog writes RATE reads
#      (3 records each) a second for SECONDS s to a monitored instance
#      (tool cat >/dev/null, block FALSE), alone and while LOOPS clients
#      hammer /api/v1/failures?limit=100, then /metrics: records received,
#      lost, records/s delivered (received / time until the instance
#      ended), the program's longest write()
# Medians of REPS runs. Environment: REPS (3), INSTANCES (1000), FAILURES
# (100000), N (500), METRICS_N (100), CTL_N (200), RATE (10000),
# SECONDS (5), LOOPS (4).
set -eu
B=$(cd "${1:-build-bench}" && pwd)
REPS=${REPS:-3}
INSTANCES=${INSTANCES:-1000}
FAILURES=${FAILURES:-100000}
N=${N:-500}
METRICS_N=${METRICS_N:-100}
CTL_N=${CTL_N:-200}
RATE=${RATE:-10000}
SECONDS_=${SECONDS:-5}
LOOPS=${LOOPS:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
CLIENT="python3 $HERE/client.py"
FILL=$B/bench/bench_http_fill
WRITER=$B/bench/bench_tm_writer
REG=$B/daemons/registry/telemonreg
TM=$B/daemons/telemonitor/telemonitor
CTL=$B/clients/telemonctl/telemonctl
SNARF=$B/daemons/snarflog/snarflog
W=$(mktemp -d)
pids=""
cleanup() {
    touch "$W/stop"
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
col() { awk -v c="$1" '{ print $c }' "$2" | median; }

# --- the service, its store filled -------------------------------------------
mkdir "$W/state"
set -- $("$FILL" "$W/state" "$INSTANCES" "$FAILURES")
echo "store: $1 instances, $2 failures, filled in $3 s"
"$REG" -listen 127.0.0.1:0 -portfile "$W/reg.port" 2>"$W/reg.err" &
pids="$! $pids"
while [ ! -s "$W/reg.port" ]; do sleep 0.05; done
R=127.0.0.1:$(cat "$W/reg.port")
cat > "$W/rc" <<RC
(class (prog "stream") (tool "cat >/dev/null") (auto TRUE) (block FALSE))
RC
"$TM" -rc "$W/rc" -state "$W/state" -regmachine "$R" -http 127.0.0.1:0 2>"$W/tm.err" &
pids="$! $pids"
export TELEMON_STATE="$W/state"
until "$CTL" status >/dev/null 2>&1; do sleep 0.05; done
H=$("$CTL" status --json | sed -n 's/.*"http":"\([^"]*\)".*/\1/p')

# --- 1. latency ----------------------------------------------------------------
: > "$W/api"; : > "$W/met"; : > "$W/ctl"
i=0
while [ $i -lt "$REPS" ]; do
    $CLIENT latency "$H" "/api/v1/failures?limit=100" "$N" >> "$W/api"
    $CLIENT latency "$H" /metrics "$METRICS_N" >> "$W/met"
    $CLIENT command "$CTL_N" "$CTL" failures --json --limit 100 >> "$W/ctl"
    i=$((i + 1))
done
MB=$(curl -s "http://$H/metrics" | wc -c)
ML=$(curl -s "http://$H/metrics" | grep -vc '^#')
echo
echo "1. latency, ms (medians of $REPS runs)          p50      p99      max"
printf '   %-40s %8s %8s %8s\n' "GET /api/v1/failures?limit=100 (x$N)" \
    "$(col 1 "$W/api")" "$(col 2 "$W/api")" "$(col 3 "$W/api")"
printf '   %-40s %8s %8s %8s\n' "telemonctl failures --json --limit 100 (x$CTL_N)" \
    "$(col 1 "$W/ctl")" "$(col 2 "$W/ctl")" "$(col 3 "$W/ctl")"
printf '   %-40s %8s %8s %8s\n' "GET /metrics (x$METRICS_N)" \
    "$(col 1 "$W/met")" "$(col 2 "$W/met")" "$(col 3 "$W/met")"
echo "   (/metrics: $MB bytes, $ML samples)"

# --- 2. records flowing while the API is hammered --------------------------------
READS=$((RATE * SECONDS_))
newest_stream() {
    "$CTL" instances --all --json | python3 -c '
import json, sys
s = [i for i in json.load(sys.stdin) if i["prog"] == "stream"]
s.sort(key=lambda i: i["id"])
i = s[-1] if s else None
print("%s %d %d" % (i["state"], i["records"], i["lost"]) if i else "none 0 0")'
}
stream() {                              # $1: path to hammer, or "none"
    rm -f "$W/stop" "$W"/hammered.*
    hp=""
    if [ "$1" != none ]; then
        j=0
        while [ $j -lt "$LOOPS" ]; do
            $CLIENT hammer "$H" "$1" "$W/stop" > "$W/hammered.$j" &
            hp="$! $hp"; j=$((j + 1))
        done
        sleep 0.5
    fi
    T0=$(date +%s.%N)
    set -- $("$SNARF" stream -regmachine "$R" -- "$WRITER" -prog stream -reads "$READS" \
        -rate "$RATE" 2>>"$W/snarf.err")
    LONGEST=$3
    while :; do
        set -- $(newest_stream)
        case $1 in ended|gone) break ;; esac
        sleep 0.05
    done
    T1=$(date +%s.%N)
    touch "$W/stop"
    for p in $hp; do wait "$p"; done
    REQ=$(cat "$W"/hammered.* 2>/dev/null | awk '{ n += $1 } END { print n + 0 }')
    printf '%s %s %.0f %s %s %.2f\n' "$2" "$3" "$(echo "$2 / ($T1 - $T0)" | bc -l)" \
        "$LONGEST" "$REQ" "$(echo "$T1 - $T0" | bc -l)"
}
echo
echo "2. $((3 * READS)) records at $((3 * RATE))/s under snarflog, medians of $REPS runs"
printf '   %-40s %9s %6s %11s %13s %9s %6s\n' "load" "received" "lost" "records/s" \
    "longest write" "requests" "wall s"
for load in none "/api/v1/failures?limit=100" /metrics; do
    : > "$W/s"
    i=0
    while [ $i -lt "$REPS" ]; do stream "$load" >> "$W/s"; i=$((i + 1)); done
    printf '   %-40s %9s %6s %11.0f %10s ms %9s %6.1f\n' \
        "$([ "$load" = none ] && echo "none" || echo "$LOOPS x GET $load")" \
        "$(col 1 "$W/s")" "$(col 2 "$W/s")" "$(col 3 "$W/s")" "$(col 4 "$W/s")" \
        "$(col 5 "$W/s")" "$(col 6 "$W/s")"
    sed 's/^/      one run: /' "$W/s"
done
