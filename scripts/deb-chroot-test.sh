#!/bin/sh
# Install the CMon .debs in a clean Debian 12 (bookworm) chroot, with their
# Depends resolved by apt, and use them there: telemonitor -check on the
# packaged /etc/cmon/telemonrc, pcheck --version, and a libcmon program built
# with pkg-config and with CMake whose log pcheck then checks.
#   scripts/deb-chroot-test.sh [DEB_DIR]     (default build-deb; run `make deb` first)
# Needs root and debootstrap. The bookworm base (about 300 MB downloaded) is
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
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"
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
mkdir -p "$root/debs"; cp "$debdir"/*.deb "$root/debs/"
# The sample program and a CMake project using the installed package.
mkdir -p "$root/t/cm"
cat >"$root/t/emit3.c" <<'C'
#include <cmon/emit.h>
#include <stdio.h>
int main(void)
{
	if (cmon_init("chroot") != 0 || !cmon_enabled()) {
		fprintf(stderr, "no log\n");
		return 1;
	}
	cmon_type t = cmon_declare("Tick", 1, (const char *const[]){ "n" });
	for (int i = 0; i < 3; i++)
		CMON_EMIT(t, i);
	cmon_flush();
	return 0;
}
C
cat >"$root/t/cm/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.25)
project(emit3 C)
find_package(cmon REQUIRED)
add_executable(emit3 ../emit3.c)
target_link_libraries(emit3 cmon::cmon)
C
printf 'Tick : event(n)\n{& t : Tick : t.n >= 0}\n' >"$root/t/tick.pspec"

cat >"$root/t/run.sh" <<'SH'
set -eu
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
t0=$(date +%s)
apt-get update -qq
apt-get install -y -qq --no-install-recommends /debs/*.deb build-essential cmake pkg-config >/t/apt.log 2>&1 ||
    { tail -30 /t/apt.log; exit 1; }
t1=$(date +%s)
echo "apt-get install of the three .debs (+ build-essential cmake pkg-config): $((t1 - t0)) s"
dpkg-query -W -f='${Package} ${Version} ${Status}\n' cmon libcmon0 libcmon-dev
echo "installed Depends pulled in: $(grep -c '^Setting up' /t/apt.log) packages set up"
getent passwd cmon
stat -c '%n %U:%G %a' /etc/cmon /etc/cmon/telemonrc /etc/cmon/fsread.pspec
pcheck --version
telemonitor -check -rc /etc/cmon/telemonrc
echo "telemonitor -check: exit $?"
cd /t
cc -o emit3-pc emit3.c $(pkg-config --cflags --libs cmon)
CMON_LOG=/t/pc.log ./emit3-pc
pcheck -s tick.pspec pc.log
echo "pkg-config build: log checked, exit $?"
cmake -S cm -B cm/build >/dev/null
cmake --build cm/build >/dev/null
CMON_LOG=/t/cm.log ./cm/build/emit3
pcheck -s tick.pspec cm.log
echo "CMake build: log checked, exit $?"
SH
echo "deb-chroot-test: installing $(ls "$debdir"/*.deb | wc -l) .debs in a copy of $base"
chroot "$root" /bin/sh /t/run.sh
echo "deb-chroot-test: passed"
