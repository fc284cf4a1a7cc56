#!/bin/sh
# bench/pspec/features.sh BUILD — what each part of Figure 3 costs pcheck's
# engine (issue 14: where the remaining time goes). Six specs over the same
# cmon-bin log, each adding one part of bench/pspec/fig3.pspec to the one
# before:
#   events   the three event types and one assertion that counts StartReads
#            (a spec without assertions reads nothing: there is nothing to check)
#   match    the interval Read (StartRead to EndRead of the same tid), counted
#   metrics  its metrics time and size
#   hit      its metric hit, a count of the CacheHits of its tid
#   assert1  Figure 3's first assertion instead of the count
#   fig3     all four of Figure 3's assertions (fig3.pspec itself)
# and fig3_floor -r, the reader alone, under them all. The counting specs
# assert the exact count (READS), so that a spec that skipped its work
# would stop the run. pcheck runs on one
# thread (--threads 1), so that each difference is engine time; the specs
# take turns, REPS times (default 9); medians of wall-clock seconds
# (cputime -w) and the difference from the row before, in ns per read.
#   BUILD  a Release build tree with bench/gen_fsread, bench/cputime,
#          bench/fig3_floor and pcheck
set -eu
B=$(cd "${1:?BUILD}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
P=$B/clients/pcheck/pcheck
"$B/bench/gen_fsread" -b "$READS" > "$W/bin.log"
# the cmon-bin log holds the ascii log's events: count them there
"$B/bench/gen_fsread" "$READS" > "$W/ascii.log"
NEVENTS=$(grep -vc '^#' "$W/ascii.log")
rm "$W/ascii.log"

EVENTS='perfspec FSRead
  timed event StartRead(tid, size);
    EndRead (tid);
  event CacheHit(tid);'
READ='  interval Read =
    s: StartRead, e: EndRead where e.tid = s.tid'
HIT='    hit = {count c : CacheHit where c.tid = s.tid} != 0'
spec() { # name, then the spec's lines after the events
    name=$1
    shift
    { echo "$EVENTS"; printf '%s\n' "$@"; echo "end FSRead"; } > "$W/$name.pspec"
}
spec events "  assert {count x : StartRead} = $READS"
spec match "$READ" '  end Read;' "  assert {count r : Read} = $READS"
spec metrics "$READ" '  metrics' '    time = ts(e) - ts(s),' '    size = s.size' '  end Read;' \
    "  assert {count r : Read} = $READS"
spec hit "$READ" '  metrics' '    time = ts(e) - ts(s),' '    size = s.size,' "$HIT" '  end Read;' \
    "  assert {count r : Read} = $READS"
spec assert1 "$READ" '  metrics' '    time = ts(e) - ts(s),' '    size = s.size,' "$HIT" '  end Read;' \
    '  assert {& r : Read : r.time <= 10 ms}'
cp "$HERE/fig3.pspec" "$W/fig3.pspec"
NAMES="events match metrics hit assert1 fig3"

# every spec must check cleanly: the counting ones hold (every read is
# matched: exit 0); Figure 3's may fail (exit 1: a failed assertion is a
# result, an error is 2)
for s in $NAMES; do
    rc=0
    "$P" --threads 1 -f -s "$W/$s.pspec" "$W/bin.log" > /dev/null || rc=$?
    case $s in assert1 | fig3) most=1;; *) most=0;; esac
    [ "$rc" -le "$most" ] || { echo "features.sh: pcheck on $s: exit $rc" >&2; exit 1; }
done
# the reader alone must hand out every event
got=$("$B/bench/fig3_floor" -r "$W/bin.log")
[ "$got" = "records $NEVENTS" ] || { echo "features.sh: fig3_floor -r: $got, want $NEVENTS" >&2; exit 1; }

for k in reader $NAMES; do : > "$W/$k.w"; done
i=0
while [ "$i" -lt "$REPS" ]; do
    i=$((i + 1))
    cpu -w "$B/bench/fig3_floor" -r "$W/bin.log" >> "$W/reader.w"
    for s in $NAMES; do
        cpu -w "$P" --threads 1 -f -s "$W/$s.pspec" "$W/bin.log" >> "$W/$s.w"
    done
done
printf '%-10s %10s %14s   (%s reads, %s, median of %s)\n' part seconds "ns/read more" "$READS" cmon-bin "$REPS"
prev=
for k in reader $NAMES; do
    m=$(median < "$W/$k.w")
    awk -v k="$k" -v m="$m" -v p="${prev:-$m}" -v n="$READS" \
        'BEGIN { printf "%-10s %10.4f %14.1f\n", k, m, (m - p) / n * 1e9 }'
    prev=$m
done
