#!/bin/sh
# bench/perturb/run.sh — does compensation give back the true durations?
#
#   bench/perturb/run.sh [BUILD_DIR [REPS]]     (defaults: build-bench, 9)
#
# Builds nothing: configure with -DCMAKE_BUILD_TYPE=Release and build the
# targets bench_perturb and pcheck first (`make bench` does). A loop of about
# 20 us is calibrated once. Each repetition runs, for K = 0, 10 and 100
# events of 2 values inside each interval, `bench_perturb run` (5,000
# intervals into a libcmon log, the uninstrumented loop timed between
# blocks: the truth), then pcheck -v on the log without and with
# --compensate. Then, 50,000 intervals long (about a second, so that each
# thread's cost is measured again), K = 100 events of 2 and of 24 values,
# with libcmon's figure from the start only (CMON_OVERHEAD_PERIOD_MS=0) and
# measured again every 100 ms. CASES="K:V:N:PERIOD_MS:LABEL ..." runs
# other cases. Per case, over the repetitions, the table gives medians of:
#   truth     ns of the uninstrumented loop
#   raw       the median interval duration pcheck sees, and its excess over
#             the truth (what the instrumentation added)
#   comp      the same with --compensate, its error, and the triple's
#             half-widths (-m/+p) at the median interval
#   inside    the share of intervals whose compensated triple [v-m, v+p]
#             contains the truth (and the same for the raw triple)
#   overhead  the log header's #cmon-overhead-ns MEAN SPREAD
set -eu

build=${1:-build-bench}
reps=${2:-9}
bin=$build/bench/bench_perturb
pcheck=$build/clients/pcheck/pcheck
cmonlog=$build/clients/cmon-log/cmon-log
for b in "$bin" "$pcheck" "$cmonlog"; do
    [ -x "$b" ] || { echo "run.sh: $b is not built" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
cat >"$tmp/w.pspec" <<'SPEC'
perfspec P
  timed event Work(tid); WorkEnd(tid); Inside(tid, i);
  interval W = s: Work, e: WorkEnd where e.tid = s.tid
    metrics time = ts(e) - ts(s)
  end W;
end P
SPEC

iters=$("$bin" calibrate 20000)
echo "loop: $iters spins (about 20 us); $reps repetitions of 5,000 intervals per K"
: >"$tmp/rows"
rep=0
while [ "$rep" -lt "$reps" ]; do
    rep=$((rep + 1))
    for case in ${CASES:-0:2:5000:0:K=0 10:2:5000:0:K=10 100:2:5000:0:K=100 \
                100:2:50000:0:K=100,long,start 100:2:50000:100:K=100,long,periodic \
                100:24:50000:0:K=100,V=24,start 100:24:50000:100:K=100,V=24,periodic}; do
        k=${case%%:*}; rest=${case#*:}
        v=${rest%%:*}; rest=${rest#*:}
        n=${rest%%:*}; rest=${rest#*:}
        period=${rest%%:*}; label=${rest#*:}
        rm -f "$tmp/log"
        truth=$(CMON_OVERHEAD_PERIOD_MS=$period CMON_LOG="$tmp/log" "$bin" run "$iters" "$n" "$k" "$v")
        "$pcheck" -s "$tmp/w.pspec" -v "$tmp/raw" "$tmp/log" >/dev/null
        "$pcheck" --compensate -s "$tmp/w.pspec" -v "$tmp/comp" "$tmp/log" >/dev/null 2>"$tmp/err" || true
        hdr=$("$cmonlog" --ascii "$tmp/log" 2>/dev/null | sed -n 's/^#cmon-overhead-ns //p' | head -n 1)
        python3 - "$label" "$truth" "$tmp/raw" "$tmp/comp" "${hdr:-none}" >>"$tmp/rows" <<'PY'
import re, statistics, sys
k, truth, raw, comp, hdr = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def triples(path):
    out = []
    for line in open(path):
        m = re.search(r"time = \[(-?[0-9.e+]+),([0-9.e+]+),([0-9.e+]+)\]", line)
        if m:
            out.append(tuple(float(x) for x in m.groups()))
    return out
def summary(ts):
    if not ts:
        return "nan nan nan nan"
    ts = sorted(ts)
    v, p, m = ts[len(ts) // 2]
    inside = sum(1 for (a, pp, mm) in ts if a - mm <= truth <= a + pp) / len(ts)
    return "%.1f %.1f %.1f %.4f" % (v, m, p, inside)
print(k, truth, summary(triples(raw)), summary(triples(comp)), hdr.replace(" ", "/"))
PY
    done
done
python3 - "$tmp/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("%-22s %9s | %9s %8s %7s | %9s %8s %13s %7s | %s" % (
    "case", "truth ns", "raw ns", "excess", "inside", "comp ns", "error", "-m/+p", "inside",
    "header overhead"))
labels = []
for r in rows:
    if r[0] not in labels:
        labels.append(r[0])
for k in labels:
    rs = [r for r in rows if r[0] == k]
    med = lambda i: statistics.median(float(r[i]) for r in rs)
    truth, raw, comp = med(1), med(2), med(6)
    print("%-22s %9.0f | %9.0f %7.1f%% %6.1f%% | %9.0f %7.1f%% %6.0f/%-6.0f %6.1f%% | %s" % (
        k, truth, raw, 100 * (raw - truth) / truth, 100 * med(5), comp,
        100 * (comp - truth) / truth, med(7), med(8), 100 * med(9), rs[len(rs) // 2][10]))
PY
