#!/bin/sh
# bench/pspec/run.sh BUILD_DIR — pcheck against mawk on the report's Figure 3.
#
# Generates a 1M-read, 4-thread log (ascii and binary) and a 100k-read one,
# then, side by side in one run and repeated (median of REPS):
#   1. mawk -f fig3.awk on the ascii log (the hand-written alternative)
#   2. pcheck -f on the same ascii log        target: >= 4x faster than mawk
#   3. pcheck -f on the binary log            target: >= 10M events/s
#      (as written to a file: ts_delta, integral values as ivalues), and on
#      the same log in the old encoding (cmon-log --compat: doubles,
#      absolute ts), with the bytes per event of the three
#   4. peak RSS of `pcheck -cont` reading the log from a pipe, 100k vs 1M
#      reads                                  target: within 10%
# and checks that mawk and pcheck reach the same verdicts.
set -eu
B=$(cd "${1:-build-bench}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPS=${REPS:-5}
. "$HERE/common.sh"
PCHECK=$B/clients/pcheck/pcheck
GEN=$B/bench/gen_fsread

"$GEN" "$READS" > "$W/big.log"
"$GEN" -b "$READS" > "$W/big.bin"
"$B/clients/cmon-log/cmon-log" --binary --compat -o "$W/big.compat.bin" "$W/big.log"
"$GEN" $((READS / 10)) > "$W/small.log"
EVENTS=$(grep -vc '^#' "$W/big.log")

# user+sys seconds of a command (stdout discarded), to the microsecond
rss() { cat "$1" | /usr/bin/time -f '%M' -o "$W/m" "$PCHECK" -cont -s "$HERE/fig3.pspec" > /dev/null 2>&1 || true; tail -n 1 "$W/m"; }

: > "$W/mawk"; : > "$W/ascii"; : > "$W/bin"; : > "$W/compat"
i=0
while [ $i -lt "$REPS" ]; do
    cpu mawk -f "$HERE/fig3.awk" "$W/big.log" >> "$W/mawk"
    cpu "$PCHECK" -f -s "$HERE/fig3.pspec" "$W/big.log" >> "$W/ascii"
    cpu "$PCHECK" -f -s "$HERE/fig3.pspec" "$W/big.bin" >> "$W/bin"
    cpu "$PCHECK" -f -s "$HERE/fig3.pspec" "$W/big.compat.bin" >> "$W/compat"
    i=$((i + 1))
done
M=$(median < "$W/mawk"); A=$(median < "$W/ascii"); BI=$(median < "$W/bin"); BC=$(median < "$W/compat")
bpe() { echo "$(wc -c < "$1") / $EVENTS" | bc -l; }
SA=$(bpe "$W/big.log"); SB=$(bpe "$W/big.bin"); SC=$(bpe "$W/big.compat.bin")
R1=$(rss "$W/small.log"); R2=$(rss "$W/big.log")

# Same verdicts? (assertion i held/failed, in order)
mawk -f "$HERE/fig3.awk" "$W/big.log" | awk '/^assertion/ { print $3 }' > "$W/v1"
"$PCHECK" -s "$HERE/fig3.pspec" "$W/big.log" | awk '/: assertion / { print ($3 == "held" ? "held" : "failed") }' > "$W/v2" || true
if cmp -s "$W/v1" "$W/v2"; then SAME=yes; else SAME=NO; fi

echo "Figure 3 spec, $READS reads, 4 threads, $EVENTS events; medians of $REPS runs (user+sys CPU seconds)"
printf '%-34s %9s %12s\n' "" "seconds" "events/s"
printf '%-34s %9s %12.0f\n' "mawk -f fig3.awk (ascii)" "$M" "$(echo "$EVENTS / $M" | bc -l)"
printf '%-34s %9s %12.0f\n' "pcheck (ascii)" "$A" "$(echo "$EVENTS / $A" | bc -l)"
printf '%-34s %9s %12.0f\n' "pcheck (binary)" "$BI" "$(echo "$EVENTS / $BI" | bc -l)"
printf '%-34s %9s %12.0f\n' "pcheck (binary, --compat encoding)" "$BC" "$(echo "$EVENTS / $BC" | bc -l)"
printf 'bytes/event: ascii %.2f, binary %.2f (%.3f of ascii), --compat binary %.2f (%.3f; target binary <= 0.5)\n' \
    "$SA" "$SB" "$(echo "$SB / $SA" | bc -l)" "$SC" "$(echo "$SC / $SA" | bc -l)"
printf 'pcheck vs mawk on ascii: %.2fx faster (target >= 4x)\n' "$(echo "$M / $A" | bc -l)"
printf 'pcheck on binary: %.1fM events/s (target >= 10M)\n' "$(echo "$EVENTS / $BI / 1000000" | bc -l)"
printf 'peak RSS of pcheck -cont from a pipe: %s KiB (%d reads), %s KiB (%d reads): %+.1f%% (target within 10%%)\n' \
    "$R1" $((READS / 10)) "$R2" "$READS" "$(echo "($R2 - $R1) * 100 / $R1" | bc -l)"
echo "same verdicts as mawk: $SAME"
