# bench/pspec/common.sh — sourced by the benchmarks here, after they set
# B (the build tree) and HERE (this folder): REPS (default 9) and READS
# (default 1,000,000) from the environment, a work folder W removed on
# exit, and median() and cpu() (bench/cputime, CPU or with -w wall-clock
# seconds of a command).
REPS=${REPS:-9}
READS=${READS:-1000000}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
cpu() { "$B/bench/cputime" "$@"; }
