#!/bin/sh
# bench/pspec/ab.sh BUILD OLD_PCHECK — the same Figure 3 benchmark as run.sh,
# for two pcheck binaries side by side in one run (interleaved, REPS times,
# medians of CPU seconds), with mawk as the reference: what a change to the
# checker costs specs that do not use it.
#   BUILD       a build tree with bench/gen_fsread, bench/cputime and the new pcheck
#   OLD_PCHECK  the pcheck to compare against (e.g. built from an older commit)
# COMPAT=1 writes the binary log with cmon-log --compat (doubles, absolute
# ts), which a pcheck from before Event.ivalues (2026-11) reads correctly;
# the default encoding it would read without the integral values.
set -eu
B=$(cd "${1:?BUILD}" && pwd)
OLD=${2:?OLD_PCHECK}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
NEW=$B/clients/pcheck/pcheck

"$B/bench/gen_fsread" "$READS" > "$W/big.log"
if [ "${COMPAT:-0}" = 1 ]; then
    "$B/clients/cmon-log/cmon-log" --binary --compat -o "$W/big.bin" "$W/big.log"
else
    "$B/bench/gen_fsread" -b "$READS" > "$W/big.bin"
fi

: > "$W/mawk"; : > "$W/old.a"; : > "$W/new.a"; : > "$W/old.b"; : > "$W/new.b"
i=0
while [ $i -lt "$REPS" ]; do
    cpu mawk -f "$HERE/fig3.awk" "$W/big.log" >> "$W/mawk"
    cpu "$OLD" -f -s "$HERE/fig3.pspec" "$W/big.log" >> "$W/old.a"
    cpu "$NEW" -f -s "$HERE/fig3.pspec" "$W/big.log" >> "$W/new.a"
    cpu "$OLD" -f -s "$HERE/fig3.pspec" "$W/big.bin" >> "$W/old.b"
    cpu "$NEW" -f -s "$HERE/fig3.pspec" "$W/big.bin" >> "$W/new.b"
    i=$((i + 1))
done
# the same verdicts and offenders
"$OLD" -f -s "$HERE/fig3.pspec" "$W/big.log" > "$W/old.out" || true
"$NEW" -f -s "$HERE/fig3.pspec" "$W/big.log" > "$W/new.out" || true
cmp -s "$W/old.out" "$W/new.out" && same=yes || same=NO
M=$(median < "$W/mawk")
OA=$(median < "$W/old.a"); NA=$(median < "$W/new.a")
OB=$(median < "$W/old.b"); NB=$(median < "$W/new.b")
printf 'reads %s, medians of %s (CPU s)\n' "$READS" "$REPS"
printf 'mawk ascii            %8.3f\n' "$M"
printf 'old pcheck ascii      %8.3f   %.2fx mawk\n' "$OA" "$(echo "$OA / $M" | bc -l)"
printf 'new pcheck ascii      %8.3f   %.2fx mawk   new/old %.3f\n' "$NA" "$(echo "$NA / $M" | bc -l)" "$(echo "$NA / $OA" | bc -l)"
printf 'old pcheck binary     %8.3f\n' "$OB"
printf 'new pcheck binary     %8.3f   new/old %.3f\n' "$NB" "$(echo "$NB / $OB" | bc -l)"
printf 'same output: %s\n' "$same"
