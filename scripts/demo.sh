#!/bin/sh
# make demo — show CMon working end to end on this machine.
#   scripts/demo.sh BUILD_DIR
# First pcheck on its own: the example specification (config/examples/
# fsread.pspec, the report's Figure 3 plus per-minute statistics) against a
# sample log. Then the whole suite on loopback: a registry, a telemonitor
# configured by config/examples/telemonrc, and the example program
# fsread-demo wrapped by snarflog; the telemonitor checks its log as it is
# written and stores the failures with the log around them, and serves them
# over HTTP on loopback (docs/http.md): the API, /metrics for Prometheus
# and the dashboard at /. Last, two versions of fsread-demo (the second
# 25% slower) are compared by their per-second statistics
# (config/examples/fsread-seconds.pspec, telemonctl compare). Everything the
# demo starts is stopped when it ends (or is interrupted); the telemonitor's
# state is kept in BUILD_DIR/demo for a look afterwards.
set -eu
B=$(cd "${1:-build}" && pwd)
TOP=$(cd "$(dirname "$0")/.." && pwd)
EX=$TOP/config/examples
PCHECK=$B/clients/pcheck/pcheck
REG=$B/daemons/registry/telemonreg
TM=$B/daemons/telemonitor/telemonitor
CTL=$B/clients/telemonctl/telemonctl
SNARF=$B/daemons/snarflog/snarflog
DEMO=$B/config/examples/fsread-demo
D=$B/demo

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*" | sed "s|$B/[a-z/]*/||g; s|$D|\$D|g"; "$@"; }

# --- 1. pcheck on a sample log ------------------------------------------------
say "1. A specification (config/examples/fsread.pspec) checked against a sample log"
"$PCHECK" -f -s "$EX/fsread.pspec" "$EX/fsread-sample.log" | cut -c1-160 || true
echo "(exit status 1: some assertion failed; --json gives the same as JSON Lines)"

# --- 2. the suite on loopback -------------------------------------------------
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$D"
mkdir -p "$D"
say "2. The suite on loopback (state and logs in $D)"
"$REG" -listen 127.0.0.1:0 -portfile "$D/reg.port" 2>"$D/telemonreg.log" &
pids="$! $pids"
i=0
until [ -s "$D/reg.port" ]; do
    i=$((i + 1)); [ $i -lt 100 ] || { cat "$D/telemonreg.log"; exit 1; }; sleep 0.05
done
R=127.0.0.1:$(cat "$D/reg.port")
echo "telemonreg listening on $R"

echo "telemonitor -rc config/examples/telemonrc -state \$D/state -regmachine $R -http 127.0.0.1:0"
"$TM" -rc "$EX/telemonrc" -state "$D/state" -regmachine "$R" -http 127.0.0.1:0 \
    2>"$D/telemonitor.log" &
pids="$! $pids"
export TELEMON_STATE="$D/state"
i=0
until "$CTL" status >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 100 ] || { cat "$D/telemonitor.log"; exit 1; }; sleep 0.05
done
# port 0: the kernel chose the port; telemonctl status shows it as bound
H=$("$CTL" status --json | sed -n 's/.*"http":"\([^"]*\)".*/\1/p')
[ -n "$H" ] || { echo "demo: the telemonitor serves no HTTP"; cat "$D/telemonitor.log"; exit 1; }
echo "telemonitor serving HTTP on $H"
run "$CTL" classes

say "3. fsread-demo under snarflog: 4 threads, 300 reads each, 2% of them slow"
echo "snarflog fsread -regmachine $R -- fsread-demo -t 4 -n 300 -r 200 -p 2"
"$SNARF" fsread -regmachine "$R" -- "$DEMO" -t 4 -n 300 -r 200 -p 2 -s 42 2>"$D/snarflog.log"
i=0
until "$CTL" instances --all | grep -q ' ended '; do
    i=$((i + 1)); [ $i -lt 200 ] || { cat "$D/telemonitor.log"; exit 1; }; sleep 0.05
done
run "$CTL" instances --all

say "4. The failures the checker found, as they were stored"
run "$CTL" failures --limit 8
first=$("$CTL" failures --limit 100000 2>/dev/null | awk 'NR == 2 { print $1 }')
if [ -n "$first" ]; then
    say "5. The log window kept with failure $first (cmon-ascii 1; pcheck reads it again)"
    run "$CTL" window "$first" | head -16
    echo "..."
    echo
    echo "$ telemonctl window $first | pcheck -f -s config/examples/fsread.pspec"
    "$CTL" window "$first" | "$PCHECK" -f -s "$EX/fsread.pspec" | head -3 | cut -c1-150 || true
    echo
    echo "To see a failure's log window:  telemonctl -state $D/state window ID"
    echo "(telemonctl asks a running telemonitor; to look at the demo's state later, start"
    echo " $TM -rc $EX/telemonrc -state $D/state -http 127.0.0.1:7363)"
fi

# --- 6. the same over HTTP ----------------------------------------------------
say "6. The same over HTTP: Prometheus metrics, the API and the dashboard"
echo "$ curl -s http://$H/metrics | grep -E '^cmon_(records|failures)_total\\{prog=\"fsread\"' | head -4"
curl -s "http://$H/metrics" | grep -E '^cmon_(records|failures)_total\{prog="fsread"' | head -4 |
    cut -c1-160
echo "$ curl -s 'http://$H/api/v1/failures?limit=1'"
curl -s "http://$H/api/v1/failures?limit=1" | cut -c1-160
echo
echo
echo "Prometheus metrics: http://$H/metrics   (docs/http.md)"
if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$H/")" = 200 ]; then
    echo "Dashboard:          http://$H/"
else
    echo "Dashboard:          http://$H/   (not served by this build yet: the API is at"
    echo "                    http://$H/api/v1/)"
fi

# --- 7. two versions compared ---------------------------------------------------
say "7. Two versions of the program compared (telemonctl history, telemonctl compare)"
echo "A class for per-second statistics (config/examples/fsread-seconds.pspec), added live:"
run "$CTL" class add prog=fsreadv spec="$EX/fsread-seconds.pspec" >/dev/null
echo "snarflog fsreadv --program-version 1.0 -- fsread-demo -t 2 -n 1200 -r 200 -p 0"
"$SNARF" fsreadv -regmachine "$R" --program-version 1.0 -- \
    "$DEMO" -t 2 -n 1200 -r 200 -p 0 -s 7 -q 2>>"$D/snarflog.log"
echo "snarflog fsreadv --program-version 1.1 -- fsread-demo -t 2 -n 1200 -r 200 -p 0 -w 25"
"$SNARF" fsreadv -regmachine "$R" --program-version 1.1 -- \
    "$DEMO" -t 2 -n 1200 -r 200 -p 0 -w 25 -s 8 -q 2>>"$D/snarflog.log"
i=0
until [ "$("$CTL" instances --all | grep -c ' fsreadv .* ended ')" -ge 2 ]; do
    i=$((i + 1)); [ $i -lt 200 ] || { cat "$D/telemonitor.log"; exit 1; }; sleep 0.05
done
sleep 0.5
run "$CTL" history fsreadv
run "$CTL" compare fsreadv 1.0 1.1
