#!/bin/sh
# bench/pspec/compact.sh BUILD OLD_PCHECK — the compact cmon-bin (issue 14,
# target 2), before and after in one run: the Figure 3 log (gen_fsread) as
# ascii, as binary in the old encoding (cmon-log --compat: values as
# doubles, absolute ts: byte for byte what writers wrote before
# Event.ivalues) and in the new one (gen_fsread -b into a file: ivalues,
# ts_delta); bytes per event of each (and of the same events with the
# times and thread ids a real program gets from libcmon); then, interleaved REPS times (medians
# of CPU seconds, bench/cputime), pcheck -f with fig3.pspec and with a spec
# that needs no event of the log (the reader and the record loop alone):
#   old   OLD_PCHECK on the old encoding (before)
#   new   the new pcheck on the old encoding
#   new*  the new pcheck on the new encoding (after)
# and checks that before and after print the same.
#   BUILD       a build tree with bench/gen_fsread, bench/cputime, cmon-log, pcheck
#   OLD_PCHECK  pcheck from before the change (it cannot read the new encoding)
set -eu
B=$(cd "${1:?BUILD}" && pwd)
OLD=${2:?OLD_PCHECK}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
NEW=$B/clients/pcheck/pcheck

"$B/bench/gen_fsread" "$READS" > "$W/big.log"
"$B/bench/gen_fsread" -b "$READS" > "$W/new.bin"
"$B/clients/cmon-log/cmon-log" --binary --compat -o "$W/old.bin" "$W/big.log"
EVENTS=$(grep -vc '^#' "$W/big.log")
cat > "$W/none.pspec" <<'SPEC'
perfspec Nothing
  timed event Unused(a);
  interval I =
    s: Unused, e: Unused
  metrics
    t = ts(e) - ts(s)
  end I;
  assert {count r : I} >= 0
end Nothing
SPEC

for k in old new newstar; do : > "$W/$k.fig3"; : > "$W/$k.none"; done
i=0
while [ $i -lt "$REPS" ]; do
    for s in fig3 none; do
        spec=$HERE/fig3.pspec
        [ $s = none ] && spec=$W/none.pspec
        cpu "$OLD" -f -s "$spec" "$W/old.bin" >> "$W/old.$s"
        cpu "$NEW" -f -s "$spec" "$W/old.bin" >> "$W/new.$s"
        cpu "$NEW" -f -s "$spec" "$W/new.bin" >> "$W/newstar.$s"
    done
    i=$((i + 1))
done
"$OLD" -f -s "$HERE/fig3.pspec" "$W/old.bin" > "$W/old.out" 2>&1 || true
"$NEW" -f -s "$HERE/fig3.pspec" "$W/new.bin" > "$W/new.out" 2>&1 || true
cmp -s "$W/old.out" "$W/new.out" && same=yes || same=NO

# The same events as libcmon would time and tag them: CLOCK_MONOTONIC
# nanoseconds some hours after boot, kernel thread ids (the tid values too).
awk '/^#/ { print; next } { $1 = sprintf("%.0f", $1 + 51234567890123); $2 += 23400; $4 += 23400; print }' \
    "$W/big.log" > "$W/real.log"
"$B/clients/cmon-log/cmon-log" --binary -o "$W/real.bin" "$W/real.log"
"$B/clients/cmon-log/cmon-log" --binary --compat -o "$W/real.old.bin" "$W/real.log"

bpe() { echo "$(wc -c < "$1") / $EVENTS" | bc -l; }
SA=$(bpe "$W/big.log"); SO=$(bpe "$W/old.bin"); SN=$(bpe "$W/new.bin")
RA=$(bpe "$W/real.log"); RO=$(bpe "$W/real.old.bin"); RN=$(bpe "$W/real.bin")
echo "Figure 3 log, $READS reads, $EVENTS events; medians of $REPS runs (CPU s)"
printf 'bytes/event: ascii %.2f, old binary %.2f (%.3f of ascii), new binary %.2f (%.3f of ascii; target <= 0.5)\n' \
    "$SA" "$SO" "$(echo "$SO / $SA" | bc -l)" "$SN" "$(echo "$SN / $SA" | bc -l)"
printf 'the same with libcmon-like times and thread ids: ascii %.2f, old binary %.2f (%.3f), new binary %.2f (%.3f)\n' \
    "$RA" "$RO" "$(echo "$RO / $RA" | bc -l)" "$RN" "$(echo "$RN / $RA" | bc -l)"
for s in fig3 none; do
    O=$(median < "$W/old.$s"); N=$(median < "$W/new.$s"); NS=$(median < "$W/newstar.$s")
    printf '%-5s old pcheck, old log %7.4f s %6.1fM ev/s | new pcheck, old log %7.4f s %6.1fM ev/s | new pcheck, new log %7.4f s %6.1fM ev/s | after/before %.3f\n' \
        "$s" "$O" "$(echo "$EVENTS / $O / 1000000" | bc -l)" "$N" "$(echo "$EVENTS / $N / 1000000" | bc -l)" \
        "$NS" "$(echo "$EVENTS / $NS / 1000000" | bc -l)" "$(echo "$NS / $O" | bc -l)"
done
echo "same output before and after: $same"
