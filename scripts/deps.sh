#!/bin/sh
# Install the Debian packages CMon needs, but only those that are missing.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh bench      also the tools the benchmarks compare against
#   scripts/deps.sh chroot     also debootstrap (scripts/deb-chroot-test.sh)
# Runs apt-get (through sudo when not root). Does nothing when all is present.
set -eu

BUILD="build-essential cmake pkg-config
libevent-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev libsqlite3-dev
libsystemd-dev libcurl4-openssl-dev libedit-dev libcmocka-dev libpq-dev libelf-dev libzstd-dev"
TEST="python3 curl clang libclang-rt-14-dev openssl procps prometheus prometheus-alertmanager
chromium libjs-chart.js debhelper dpkg-dev fakeroot lintian postgresql-15 faketime"
BENCH="mawk socat rsyslog liblttng-ust-dev lttng-tools hyperfine time bc"

want="$BUILD $TEST"
[ "${1:-}" = bench ] && want="$want $BENCH"
[ "${1:-}" = chroot ] && want="$want debootstrap"

missing=""
for p in $want; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done

[ -z "$missing" ] && exit 0

echo "deps: installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# (syslog-ng conflicts with rsyslog as a package; bench/ unpacks it with dpkg -x.)
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
