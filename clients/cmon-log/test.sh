#!/bin/sh
# test.sh — black-box tests of cmon-log: conversions both ways, header and
# gaps kept, warnings with line numbers / byte offsets, exit statuses.
# Usage: test.sh PATH/TO/cmon-log
set -u
CMONLOG=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# expect_status WANT CMD... : run CMD, check its exit status.
expect_status() {
    want=$1
    shift
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    [ "$got" -eq "$want" ] || fail "'$*' exited $got, expected $want ($(cat "$T/err"))"
}

# expect_in FILE TEXT : FILE contains the fixed string TEXT.
expect_in() {
    grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"
}

cat >"$T/in.log" <<'LOG'
#cmon-ascii 1
#program fsread
#tick-ns 2.5
#owner ops team
1000 7 StartRead 7 4096
# a comment

1800	7  CacheHit 7
x1 7 Broken
#cmon-gap 3
9200 -7 EndRead 7 0.1 -2.5e-3
9300 0 call@read
9400 0 ret@read 1 2
LOG

cat >"$T/want.log" <<'LOG'
#cmon-ascii 1
#program fsread
#tick-ns 2.5
#owner ops team
1000 7 StartRead 7 4096
1800 7 CacheHit 7
#cmon-gap 3
9200 -7 EndRead 7 0.1 -0.0025
9300 0 call@read
9400 0 ret@read 1 2
LOG

# ascii -> ascii: normalised, the malformed record reported with its line.
expect_status 0 "$CMONLOG" "$T/in.log"
cmp -s "$T/out" "$T/want.log" || fail "ascii dump differs: $(diff "$T/want.log" "$T/out")"
expect_in "$T/err" "$T/in.log:9: warning: bad timestamp 'x1'"

# ascii -> binary -> ascii (file, stdin, pipe) gives the same text.
expect_status 0 "$CMONLOG" --binary -o "$T/a.bin" "$T/in.log"
[ -s "$T/a.bin" ] || fail "no binary output"
expect_status 0 "$CMONLOG" "$T/a.bin"
cmp -s "$T/out" "$T/want.log" || fail "binary dump differs: $(diff "$T/want.log" "$T/out")"
[ -s "$T/err" ] && fail "unexpected warnings: $(cat "$T/err")"
"$CMONLOG" - <"$T/a.bin" >"$T/out2" || fail "reading stdin"
cmp -s "$T/out2" "$T/want.log" || fail "stdin dump differs"
cat "$T/a.bin" | "$CMONLOG" -a >"$T/out3" || fail "reading a pipe"
cmp -s "$T/out3" "$T/want.log" || fail "pipe dump differs"

# binary -> ascii -> binary is byte for byte the same log.
"$CMONLOG" "$T/a.bin" | "$CMONLOG" -b >"$T/b.bin" || fail "round trip"
cmp -s "$T/a.bin" "$T/b.bin" || fail "binary round trip differs"
"$CMONLOG" --binary "$T/a.bin" >"$T/c.bin" || fail "binary to binary"
cmp -s "$T/a.bin" "$T/c.bin" || fail "binary to binary differs"

# A bad frame in a binary log is reported with its byte offset. (The log
# ends with End{records: 5}, 5 bytes: drop it, since reading stops there.)
od -An -tx1 "$T/a.bin" | tr -d ' \n' | grep -q '042a020805$' || fail "a.bin does not end with End{5}"
size=$(($(wc -c <"$T/a.bin") - 5))
head -c "$size" "$T/a.bin" >"$T/bad.bin"
printf '\002\377\377' >>"$T/bad.bin"
expect_status 0 "$CMONLOG" "$T/bad.bin"
expect_in "$T/err" "$T/bad.bin:@$size: warning: frame of 2 bytes is not a valid Record"
"$CMONLOG" - <"$T/bad.bin" 2>"$T/err" >/dev/null
expect_in "$T/err" "<stdin>:@$size: warning:"

# Exit statuses and messages.
expect_status 3 "$CMONLOG" "$T/missing.log"
expect_in "$T/err" "cmon-log: $T/missing.log: No such file or directory"
printf 'hello world\n' >"$T/junk"
expect_status 3 "$CMONLOG" "$T/junk"
expect_in "$T/err" "cmon-log: $T/junk: unrecognized log format"
printf '#cmon-ascii 1\n#tick-ns 0\n' >"$T/badhdr.log"
expect_status 3 "$CMONLOG" "$T/badhdr.log"
expect_in "$T/err" "bad header: line 2: bad tick-ns '0'"
expect_status 2 "$CMONLOG" --no-such-option
expect_status 2 "$CMONLOG" a b
expect_in "$T/err" "more than one LOG"
expect_status 1 "$CMONLOG" -o "$T/no/such/dir/x" "$T/in.log"
expect_status 0 "$CMONLOG" --help
expect_in "$T/out" "Usage: cmon-log"
expect_status 0 "$CMONLOG" --version
expect_in "$T/out" "cmon-log "

# A log with only a header converts to only a header.
printf '#cmon-ascii 1\n#program p\n' >"$T/empty.log"
expect_status 0 "$CMONLOG" -b -o "$T/empty.bin" "$T/empty.log"
expect_status 0 "$CMONLOG" "$T/empty.bin"
printf '#cmon-ascii 1\n#program p\n' | cmp -s - "$T/out" || fail "header-only log: $(cat "$T/out")"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)" >&2
    exit 1
fi
echo "cmon-log: all tests passed"
