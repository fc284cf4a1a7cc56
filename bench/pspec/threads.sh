#!/bin/sh
# bench/pspec/threads.sh BUILD — pcheck reading ahead on a second thread
# (issue 14, target 1: at most 0.2x mawk with 10% offending reads printed,
# at most 0.1x on the usual log): mawk, pcheck --threads 1 and pcheck (two
# threads, the default) taking turns, REPS times (default 9), medians of
# wall-clock seconds (cputime -w) and, for the record, of CPU seconds.
#   BUILD  a Release build tree with bench/gen_fsread, bench/cputime, pcheck
# Logs: gen_fsread -p 10 READS (10% slow reads, every offender printed with
# -f) and gen_fsread READS (one slow read in 2,000), READS = 1,000,000.
set -eu
B=$(cd "${1:?BUILD}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPS=${REPS:-9}
READS=${READS:-1000000}
P=$B/clients/pcheck/pcheck
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
"$B/bench/gen_fsread" -p 10 "$READS" > "$W/p10.log"
"$B/bench/gen_fsread" "$READS" > "$W/usual.log"
# the three must agree before anything is timed
"$P" --threads 1 -f -s "$HERE/fig3.pspec" "$W/p10.log" > "$W/one.out" || true
"$P" -f -s "$HERE/fig3.pspec" "$W/p10.log" > "$W/two.out" || true
cmp -s "$W/one.out" "$W/two.out" || { echo "threads.sh: outputs differ" >&2; exit 1; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for log in p10 usual; do
    for k in mawk one two; do : > "$W/$log.$k.w"; : > "$W/$log.$k.c"; done
    i=0
    while [ "$i" -lt "$REPS" ]; do
        i=$((i + 1))
        "$B/bench/cputime" -w mawk -f "$HERE/fig3.awk" "$W/$log.log" >> "$W/$log.mawk.w"
        "$B/bench/cputime" -w "$P" --threads 1 -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.one.w"
        "$B/bench/cputime" -w "$P" -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.two.w"
        "$B/bench/cputime" "$P" --threads 1 -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.one.c"
        "$B/bench/cputime" "$P" -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.two.c"
    done
done
printf '%-34s %10s %10s\n' "wall-clock s (median of $REPS)" "10% slow" "usual"
for k in mawk one two; do
    case $k in mawk) name="mawk -f fig3.awk";; one) name="pcheck --threads 1";; two) name="pcheck (2 threads)";; esac
    printf '%-34s %10s %10s\n' "$name" "$(median < "$W/p10.$k.w")" "$(median < "$W/usual.$k.w")"
done
for log in p10 usual; do
    m=$(median < "$W/$log.mawk.w"); o=$(median < "$W/$log.one.w"); t=$(median < "$W/$log.two.w")
    oc=$(median < "$W/$log.one.c"); tc=$(median < "$W/$log.two.c")
    awk -v l="$log" -v m="$m" -v o="$o" -v t="$t" -v oc="$oc" -v tc="$tc" 'BEGIN {
        printf "%-6s one/mawk %.3fx  two/mawk %.3fx  two/one %.2f  CPU s one %.3f two %.3f\n",
               l, o / m, t / m, t / o, oc, tc }'
done
