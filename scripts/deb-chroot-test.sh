#!/bin/sh
# Install the CMon .debs in a clean Debian 12 (bookworm) chroot, with their
# Depends resolved by apt, and use them there: telemonitor -check on the
# packaged /etc/cmon/telemonrc (no class), pcheck --version, the docs in
# /usr/share/doc/cmon, and libcmon programs (a test client, the shipped
# example) built with pkg-config and with CMake whose logs pcheck then checks.
#   scripts/deb-chroot-test.sh [DEB_DIR]     (default build-deb; run `make deb` first)
# Needs root and debootstrap (installed if missing). The bookworm base (about 300 MB downloaded) is
# kept in $CMON_CHROOT_CACHE (default /var/cache/cmon-chroot) and copied for
# each run, so every run starts from a clean system. Not part of `make
# check` (network, size); see docs/INSTALL.md.
set -eu

debdir=$(cd "${1:-build-deb}" && pwd)
cache=${CMON_CHROOT_CACHE:-/var/cache/cmon-chroot}
mirror=${CMON_MIRROR:-http://deb.debian.org/debian}
base=$cache/bookworm

die() { echo "deb-chroot-test: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || "$(dirname "$0")/deps.sh" chroot
ls "$debdir"/cmon_*.deb "$debdir"/libcmon0_*.deb "$debdir"/libcmon-dev_*.deb >/dev/null 2>&1 ||
    die "no cmon, libcmon0 and libcmon-dev .debs in $debdir (make deb)"

if [ ! -e "$base/.complete" ]; then
    echo "deb-chroot-test: debootstrap bookworm into $base"
    rm -rf "$base"; mkdir -p "$cache"
    debootstrap --variant=minbase bookworm "$base" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
        die "debootstrap failed, see $cache/debootstrap.log"
    touch "$base/.complete"
fi

root=$(mktemp -d /var/tmp/cmon-chroot.XXXXXX)
cleanup() {
    for m in dev/pts dev proc sys; do umount "$root/$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT INT TERM
cp -a "$base/." "$root/"
mount --bind /dev "$root/dev"; mount --bind /dev/pts "$root/dev/pts"
mount -t proc proc "$root/proc"; mount -t sysfs sys "$root/sys"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/debs"
cp "$debdir"/cmon_*.deb "$debdir"/libcmon0_*.deb "$debdir"/libcmon-dev_*.deb "$root/debs/"
# The libcmon client of the tests (emit3.c, its CMake project, tick.pspec).
mkdir -p "$root/t"
cp -r "$(dirname "$0")/../tests/integration/pkg" "$root/t/pkg"

cat >"$root/t/run.sh" <<'SH'
set -eu
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
t0=$(date +%s)
apt-get update -qq
apt-get install -y -qq --no-install-recommends /debs/*.deb >/t/apt.log 2>&1 ||
    { tail -30 /t/apt.log; exit 1; }
t1=$(date +%s)
echo "apt-get install of the three .debs: $((t1 - t0)) s, $(grep -c '^Setting up' /t/apt.log) packages set up"
dpkg-query -W -f='${Package} ${Version} ${Status}\n' cmon libcmon0 libcmon-dev
apt-get install -y -qq --no-install-recommends build-essential cmake pkg-config >/t/apt2.log 2>&1 ||
    { tail -30 /t/apt2.log; exit 1; }
echo "then build-essential cmake pkg-config: $(($(date +%s) - t1)) s"
getent passwd cmon
stat -c '%n %U:%G %a' /etc/cmon /etc/cmon/telemonrc
pcheck --version
# The packaged configuration names no class: the service starts idle.
telemonitor -check -rc /etc/cmon/telemonrc | grep "(0 classes)"
for d in pspec protocol http alerting PERFORMANCE; do test -f /usr/share/doc/cmon/$d.md; done
echo "docs: in /usr/share/doc/cmon"
# The service's user can read its configuration (root:cmon 0750 / 0640).
runuser -u cmon -- telemonitor -check -rc /etc/cmon/telemonrc
cd /t/pkg
echo "pkg-config --cflags --libs cmon: $(pkg-config --cflags --libs cmon)"
cc -o /t/emit3-pc emit3.c $(pkg-config --cflags --libs cmon)
CMON_LOG=/t/pc.log /t/emit3-pc
pcheck -s tick.pspec /t/pc.log
echo "pkg-config build: log checked"
ex=/usr/share/doc/cmon/examples
cc -Wall -Wextra -Werror -o /t/fsread-demo $ex/fsread-demo.c $(pkg-config --cflags --libs cmon) -pthread
CMON_LOG=/t/fsread.log /t/fsread-demo -t 2 -n 200 -r 0 -p 0 -q
pcheck -s $ex/fsread.pspec /t/fsread.log || [ $? -eq 1 ]
echo "the example fsread-demo.c: built with the installed headers, log checked"
cmake -S . -B /t/build >/dev/null
cmake --build /t/build >/dev/null
for exe in emit3 emit3-static; do
    CMON_LOG=/t/$exe.log /t/build/$exe
    pcheck -s tick.pspec /t/$exe.log
    echo "CMake build ($exe): log checked"
done
echo "chroot size: $(du -sm --exclude=/proc --exclude=/sys --exclude=/dev / 2>/dev/null | cut -f1) MB"
SH
echo "deb-chroot-test: installing $(ls "$root"/debs/*.deb | wc -l) .debs in a copy of $base ($(du -sm "$base" | cut -f1) MB)"
chroot "$root" /bin/sh /t/run.sh
echo "deb-chroot-test: passed"
