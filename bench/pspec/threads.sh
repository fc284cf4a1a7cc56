#!/bin/sh
# bench/pspec/threads.sh BUILD — pcheck reading ahead on a second thread
# (issue 14, target 1: at most 0.2x mawk with 10% offending reads printed,
# at most 0.1x on the usual log; target 2: at least 40M events/s on the
# binary log): mawk, pcheck --threads 1, pcheck (two threads, the default)
# and, as the floor under pcheck, fig3_floor (Figure 3 written by hand in C
# over pcheck's own reader, one thread and reading ahead with -t) and the
# floor under that, fig3_floor -r (the reader alone: every record taken and
# looked at, nothing checked), taking
# turns, REPS times (default 9), medians of wall-clock seconds (cputime -w)
# and, for the record, of pcheck's CPU seconds.
#   BUILD  a Release build tree with bench/gen_fsread, bench/cputime,
#          bench/fig3_floor and pcheck
# Logs: gen_fsread -p 10 READS (10% slow reads, every offender printed with
# -f), gen_fsread READS (one slow read in 2,000), and the latter in
# cmon-bin (gen_fsread -b: no mawk there), READS = 1,000,000.
set -eu
B=$(cd "${1:?BUILD}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
P=$B/clients/pcheck/pcheck
F=$B/bench/fig3_floor
"$B/bench/gen_fsread" -p 10 "$READS" > "$W/p10.log"
"$B/bench/gen_fsread" "$READS" > "$W/usual.log"
"$B/bench/gen_fsread" -b "$READS" > "$W/bin.log"
# all must agree before anything is timed
"$P" --threads 1 -f -s "$HERE/fig3.pspec" "$W/p10.log" > "$W/one.out" || true
"$P" -f -s "$HERE/fig3.pspec" "$W/p10.log" > "$W/two.out" || true
cmp -s "$W/one.out" "$W/two.out" || { echo "threads.sh: outputs differ" >&2; exit 1; }
# fig3_floor must print what mawk prints; the cmon-bin log holds the usual
# log's events, so its reference is mawk on the usual log
mawk -f "$HERE/fig3.awk" "$W/p10.log" > "$W/p10.ref"
mawk -f "$HERE/fig3.awk" "$W/usual.log" > "$W/usual.ref"
cp "$W/usual.ref" "$W/bin.ref"
for log in p10 usual bin; do
    for o in "" -t; do
        "$F" $o "$W/$log.log" > "$W/floor.out"
        cmp -s "$W/$log.ref" "$W/floor.out" || { echo "threads.sh: fig3_floor $o differs from mawk on $log" >&2; exit 1; }
    done
done
EVENTS=$(grep -vc '^#' "$W/usual.log")
# the reader alone must hand out every event of each log
for log in p10 usual bin; do
    want=$EVENTS
    [ "$log" = p10 ] && want=$(grep -vc '^#' "$W/p10.log")
    got=$("$F" -r "$W/$log.log")
    [ "$got" = "records $want" ] || { echo "threads.sh: fig3_floor -r on $log: $got, want $want" >&2; exit 1; }
done
for log in p10 usual bin; do
    for k in mawk one two f1 f2 rd; do : > "$W/$log.$k.w"; : > "$W/$log.$k.c"; done
    i=0
    while [ "$i" -lt "$REPS" ]; do
        i=$((i + 1))
        [ "$log" = bin ] || cpu -w mawk -f "$HERE/fig3.awk" "$W/$log.log" >> "$W/$log.mawk.w"
        cpu -w "$P" --threads 1 -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.one.w"
        cpu -w "$P" -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.two.w"
        cpu -w "$F" "$W/$log.log" >> "$W/$log.f1.w"
        cpu -w "$F" -t "$W/$log.log" >> "$W/$log.f2.w"
        cpu -w "$F" -r "$W/$log.log" >> "$W/$log.rd.w"
        cpu "$P" --threads 1 -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.one.c"
        cpu "$P" -f -s "$HERE/fig3.pspec" "$W/$log.log" >> "$W/$log.two.c"
    done
done
echo - > "$W/bin.mawk.w"      # mawk does not read cmon-bin
printf '%-34s %10s %10s %10s\n' "wall-clock s (median of $REPS)" "10% slow" "usual" "cmon-bin"
for k in mawk one two f1 f2 rd; do
    case $k in
    mawk) name="mawk -f fig3.awk";; one) name="pcheck --threads 1";; two) name="pcheck (2 threads)";;
    f1) name="fig3_floor (1 thread)";; f2) name="fig3_floor -t (2 threads)";;
    rd) name="fig3_floor -r (reader alone)";;
    esac
    printf '%-34s %10s %10s %10s\n' "$name" "$(median < "$W/p10.$k.w")" "$(median < "$W/usual.$k.w")" \
        "$(median < "$W/bin.$k.w")"
done
for log in p10 usual; do
    m=$(median < "$W/$log.mawk.w"); o=$(median < "$W/$log.one.w"); t=$(median < "$W/$log.two.w")
    f1=$(median < "$W/$log.f1.w"); f2=$(median < "$W/$log.f2.w"); rd=$(median < "$W/$log.rd.w")
    oc=$(median < "$W/$log.one.c"); tc=$(median < "$W/$log.two.c")
    awk -v l="$log" -v m="$m" -v o="$o" -v t="$t" -v f1="$f1" -v f2="$f2" -v rd="$rd" -v oc="$oc" -v tc="$tc" 'BEGIN {
        printf "%-6s one/mawk %.3fx  two/mawk %.3fx  two/one %.2f  floor/mawk %.3fx (-t %.3fx)  reader/mawk %.3fx  CPU s one %.3f two %.3f\n",
               l, o / m, t / m, t / o, f1 / m, f2 / m, rd / m, oc, tc }'
done
o=$(median < "$W/bin.one.w"); t=$(median < "$W/bin.two.w"); f1=$(median < "$W/bin.f1.w"); f2=$(median < "$W/bin.f2.w")
rd=$(median < "$W/bin.rd.w")
awk -v n="$EVENTS" -v o="$o" -v t="$t" -v f1="$f1" -v f2="$f2" -v rd="$rd" 'BEGIN {
    printf "cmon-bin, M events/s: pcheck one %.1f, two %.1f; floor %.1f (-t %.1f); reader alone %.1f; %d events\n",
           n / o / 1e6, n / t / 1e6, n / f1 / 1e6, n / f2 / 1e6, n / rd / 1e6, n }'
