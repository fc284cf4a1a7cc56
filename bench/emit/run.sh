#!/bin/sh
# bench/emit/run.sh — cost per event of cmon_emit() side by side with an
# LTTng-UST tracepoint and fprintf() to a pipe, in one run.
#
#   bench/emit/run.sh [BUILD_DIR [REPS]]     (defaults: build-bench, 7)
#
# Builds nothing: configure with -DCMAKE_BUILD_TYPE=Release and build the
# targets bench_emit and bench_emit_lttng first (`make bench` does). Each
# repetition runs every mode once, in turn, each in a fresh process; the
# table gives, per mode, the median over the repetitions of:
#   median  ns per event of a typical event (median 16-event block)
#   mean    ns per event amortized over the run, every write(2) included
#   p99     ns per event in the 99th-percentile block
#   drop%   events the library dropped because the reader fell behind
# and the ratios of median and mean to cmon-pipe's.
# With the lttng tools installed, a private session daemon is started and
# the tracepoint enabled for the lttng-session mode; otherwise that row
# says why it is missing.
# Environment: BASELINE=DIR adds the rows cmon-devnull-old,
# cmon-file-old and cmon-pipe-old, the same modes with the libcmon.so.0 in DIR (an older
# build: a before/after in one run); CPU=N runs every mode on CPU N
# (taskset), since on a VM one vCPU can be slower than the other for a
# while and an unpinned run mixes the two.
set -eu

build=${1:-build-bench}
reps=${2:-7}
bin=$build/bench/bench_emit
lbin=$build/bench/bench_emit_lttng
if [ ! -x "$bin" ]; then
    echo "run.sh: $bin is not built (cmake --build $build --target bench_emit bench_emit_lttng)" >&2
    exit 2
fi

tmp=$(mktemp -d)
sessiond=""
cleanup() {
    if [ -n "$sessiond" ]; then
        LTTNG_HOME=$tmp lttng destroy -a >/dev/null 2>&1 || true
        kill "$sessiond" 2>/dev/null || true
        wait "$sessiond" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

modes="tsc clock cmon-off cmon-devnull cmon-file cmon-pipe fprintf-pipe cmon-pipe-1M fprintf-pipe-1M"
lmodes=""
note_session="lttng-session: not measured: the lttng tools (lttng, lttng-sessiond) are not installed"
if [ -x "$lbin" ]; then
    lmodes="lttng-off"
    if command -v lttng >/dev/null 2>&1 && command -v lttng-sessiond >/dev/null 2>&1; then
        # A private session daemon, so no system tracing setup is touched.
        LTTNG_HOME=$tmp lttng-sessiond --no-kernel >/dev/null 2>&1 &
        sessiond=$!
        sleep 1
        if LTTNG_HOME=$tmp lttng create cmonbench --output="$tmp/trace" >/dev/null 2>&1 &&
           LTTNG_HOME=$tmp lttng enable-event --userspace cmon_bench:start_read >/dev/null 2>&1 &&
           LTTNG_HOME=$tmp lttng start >/dev/null 2>&1; then
            lmodes="$lmodes lttng-session"
            note_session=""
        else
            note_session="lttng-session: not measured: could not set up a tracing session"
        fi
    fi
else
    note_session="lttng-off, lttng-session: not measured: bench_emit_lttng not built (lttng-ust missing)"
fi

echo "libcmon emit benchmark — $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -sr), $(nproc) CPUs"
lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1
echo "reps=$reps; event StartRead(tid, size) with CLOCK_MONOTONIC-nanosecond timestamp and thread id"
echo "cmon modes read the TSC where the kernel's clocksource is it (emit_clock.c); cmon-pipe-mono"
echo "is cmon-pipe with CMON_CLOCK=monotonic (clock_gettime), the same run's before/after"
echo

pin=""
if [ -n "${CPU:-}" ]; then
    pin="taskset -c $CPU"
    echo "every mode on CPU $CPU"
fi
old_modes=""
if [ -n "${BASELINE:-}" ]; then
    if [ ! -e "$BASELINE/libcmon.so.0" ]; then
        echo "run.sh: BASELINE=$BASELINE holds no libcmon.so.0" >&2
        exit 2
    fi
    old_modes="cmon-devnull-old cmon-file-old cmon-pipe-old"
    echo "*-old rows: libcmon.so.0 from $BASELINE"
fi
[ -z "$pin$old_modes" ] || echo

r=1
while [ "$r" -le "$reps" ]; do
    for m in $modes; do
        $pin "$bin" "$m" >>"$tmp/raw" || echo "$m failed" >&2
    done
    # the same as cmon-pipe, timed by clock_gettime() instead of the TSC
    CMON_CLOCK=monotonic $pin "$bin" cmon-pipe | sed 's/^cmon-pipe /cmon-pipe-mono /' >>"$tmp/raw" ||
        echo "cmon-pipe-mono failed" >&2
    for m in $old_modes; do
        b=${m%-old}
        LD_LIBRARY_PATH=$BASELINE $pin "$bin" "$b" | sed "s/^$b /$m /" >>"$tmp/raw" ||
            echo "$m failed" >&2
    done
    for m in $lmodes; do
        LTTNG_HOME=$tmp $pin "$lbin" "$m" >>"$tmp/raw" || echo "$m failed" >&2
    done
    r=$((r + 1))
done

awk -v order="$modes cmon-pipe-mono $old_modes $lmodes" '
function median(list,    a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++)               # insertion sort: n is small
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
            t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
        }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ med[$1] = med[$1] " " $2; mean[$1] = mean[$1] " " $3; p99[$1] = p99[$1] " " $4
  drop[$1] = drop[$1] " " (100 * $5 / $6) }
END {
    ref_med = median(med["cmon-pipe"]); ref_mean = median(mean["cmon-pipe"])
    printf "%-17s %10s %10s %10s %7s %10s %10s\n", "mode", "median ns", "mean ns", "p99 ns", "drop%", "median/cmon", "mean/cmon"
    n = split(order, m, " ")
    for (i = 1; i <= n; i++) {
        k = m[i]
        if (!(k in med)) continue
        printf "%-17s %10.1f %10.1f %10.1f %7.2f %10.2fx %10.2fx\n", k, median(med[k]),
               median(mean[k]), median(p99[k]), median(drop[k]),
               median(med[k]) / ref_med, median(mean[k]) / ref_mean
    }
}' "$tmp/raw"
[ -z "$note_session" ] || { echo; echo "$note_session"; }
