"""The Debian packages, built fresh as `make deb` does (the sources git
knows, copied out of tree, dpkg-buildpackage -b): each package holds what
it should (programs, units, sysusers and tmpfiles, man pages with
telemonreg(8) and the cmon_*(3) aliases, pc and CMake files), the
conffiles and Depends are right, lintian is clean apart from the
documented overrides; then, extracted into a throwaway root, the programs
run (pcheck --version, telemonitor -check on the packaged telemonrc, which
names no class), the registry and a telemonitor on that telemonrc start
idle and say so, every document a man page cites is at its path, a
libcmon client and the shipped examples build against libcmon-dev with
pkg-config (the examples with no more than it gives) and with CMake and
their logs check, and systemd-analyze verifies the units (when there is
one). Skipped (77) when the packaging tools are missing."""
import gzip
import glob
import json
import os
import re
import shutil
import signal
import subprocess

import cmontest as ct
from cmontest import check

PKG = os.path.join(ct.HERE, "pkg")
# The documents the man pages cite, installed uncompressed under their names.
DOCS = ["pspec.md", "protocol.md", "http.md", "alerting.md", "PERFORMANCE.md"]
TOOLS = ["git", "dpkg-buildpackage", "dpkg-deb", "dh", "fakeroot", "lintian", "pkg-config",
         "cmake", "cc"]


def run(argv, env=None, cwd=None, timeout=600, ok=(0,)):
    """Runs argv; fails the test with its output when its exit is not in ok."""
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    check(p.returncode in ok, "%s: exit %d\n%s", " ".join(argv), p.returncode, out[-6000:])
    return out


def skip(reason):
    ct.skip(reason)


def build_debs(env):
    """make deb, into env: returns the folder holding the .debs."""
    top = env.path("deb")
    src = os.path.join(top, "src")
    os.makedirs(src)
    files = subprocess.run(["git", "-C", ct.SOURCE, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], stdout=subprocess.PIPE, check=True).stdout
    for rel in files.decode().split("\0"):
        if rel and os.path.lexists(os.path.join(ct.SOURCE, rel)):
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            shutil.copy2(os.path.join(ct.SOURCE, rel), os.path.join(src, rel), follow_symlinks=False)
    check(not os.path.exists(os.path.join(src, "build")), "build/ was copied")
    jobs = os.cpu_count() or 2
    run(["dpkg-buildpackage", "-b", "-us", "-uc", "-j%d" % jobs], cwd=src, timeout=840)
    return top


def contents(deb):
    """{path: listing line} of a .deb (paths without the leading '.')."""
    out = {}
    for line in run(["dpkg-deb", "-c", deb]).splitlines():
        m = re.match(r"^\S+ \S+ +\d+ \S+ \S+ \.(/\S*)(?: -> (\S+))?$", line)
        if m:
            out[m.group(1).rstrip("/") or "/"] = line
    return out


def has(listing, pattern, what):
    """Checks that some path of listing matches the regex pattern."""
    check(any(re.fullmatch(pattern, p) for p in listing), "%s: no %s in\n%s",
          what, pattern, "\n".join(sorted(listing)))


def man_references(root):
    """Every /usr/share/doc/cmon/... path a packaged man page names is a
    file of the package; the pages cite at least the DOCS."""
    cited = set()
    for page in glob.glob(os.path.join(root, "usr/share/man/man*/*.gz")):
        with gzip.open(page, "rt", errors="replace") as f:
            text = f.read().replace("\\-", "-")
        for ref in re.findall(r"/usr/share/doc/cmon/[\w./-]*\w", text):
            check(os.path.exists(os.path.join(root, ref.lstrip("/"))), "%s cites %s, not installed",
                  os.path.basename(page), ref)
            cited.add(os.path.basename(ref))
        check(not re.search(r"(^|[ (])docs/\w+\.md", text, re.M),
              "%s cites a docs/ path of the sources", os.path.basename(page))
    check(set(DOCS) <= cited, "the man pages cite %r", sorted(cited))


def services_start_idle(env, root, e):
    """The packaged registry, and a telemonitor on the packaged telemonrc,
    start and run; the telemonitor monitors nothing and says so."""
    bindir = os.path.join(root, "usr/bin")
    portfile = env.path("reg.port")
    reg = env.spawn("telemonreg", [os.path.join(bindir, "telemonreg"), "-listen", "127.0.0.1:0",
                                   "-portfile", portfile], env=e)
    port = int(ct.wait_file(portfile, 10).strip())
    state = env.path("tm-state")
    tm = env.spawn("telemonitor", [os.path.join(bindir, "telemonitor"), "-rc",
                                   os.path.join(root, "etc/cmon/telemonrc"), "-state", state,
                                   "-regmachine", "127.0.0.1:%d" % port], env=e)
    ct.wait_for(lambda: "no class configured" in tm.stderr(), 15, "telemonitor's idle notice")

    def status():
        p = subprocess.run([os.path.join(bindir, "telemonctl"), "-state", state, "status",
                            "--json"], env=e, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if p.returncode:
            return None
        st = json.loads(p.stdout)
        return st if st["registry_state"] == "connected" else None
    st = ct.wait_for(status, 15, "telemonitor connected to the registry")
    check(st["classes"] == 0 and st["instances"] == 0, "idle telemonitor: %r", st)
    check(tm.alive() and reg.alive(), "a service stopped:\n%s\n%s", tm.stderr(), reg.stderr())
    for proc in (tm, reg):
        proc.signal(signal.SIGTERM)
        check(proc.wait() == 0, "%s exit status on SIGTERM:\n%s", proc.name, proc.stderr())


def examples_build(env, root, e, pc):
    """The shipped example program builds with what pkg-config cmon gives
    (the installed headers only; warnings are errors), and its log passes
    the shipped spec."""
    ex = os.path.join(root, "usr/share/doc/cmon/examples")
    srcs = sorted(glob.glob(os.path.join(ex, "*.c")))
    check(srcs, "no example programs in %s", ex)
    flags = run(["pkg-config", "--define-variable=prefix=" + os.path.join(root, "usr"),
                 "--cflags", "--libs", "cmon"], env=pc).split()
    for src in srcs:
        exe = env.path(os.path.basename(src)[:-2])
        run(["cc", "-Wall", "-Wextra", "-Werror", "-o", exe, src] + flags + ["-pthread"])
    log = env.path("fsread-demo.log")
    run([env.path("fsread-demo"), "-t", "2", "-n", "200", "-r", "0", "-p", "0", "-q"],
        env=dict(e, CMON_LOG=log))
    out = run([os.path.join(root, "usr/bin/pcheck"), "-s", os.path.join(ex, "fsread.pspec"), log],
              env=e, ok=(0, 1))
    check("held" in out and "read at most 10 ms" in out, "fsread-demo's log: %s", out)


def main():
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        skip("missing %s (scripts/deps.sh installs them)" % ", ".join(missing))
    if subprocess.run(["git", "-C", ct.SOURCE, "rev-parse"], stderr=subprocess.DEVNULL).returncode:
        skip("%s is not a git work tree" % ct.SOURCE)
    with ct.Env("deb") as env:
        top = build_debs(env)
        debs = {}
        for name in ["cmon", "libcmon0", "libcmon-dev", "libpspec0", "libpspec-dev"]:
            hits = glob.glob(os.path.join(top, "%s_0.1.0-1_*.deb" % name))
            check(len(hits) == 1, "%s: .debs: %r", name, os.listdir(top))
            debs[name] = hits[0]

        # What each package holds.
        cmon = contents(debs["cmon"])
        for b in ["telemonreg", "snarflog", "telemonitor", "pcheck", "peval", "psolve",
                  "telemonctl", "cmon-wrap", "cmon-log", "pinfer"]:
            has(cmon, "/usr/bin/" + b, "cmon")
        for u in ["telemonitor.service", "telemonreg.service", "telemonreg.socket"]:
            has(cmon, "(/usr)?/lib/systemd/system/" + u, "cmon")
        has(cmon, "/usr/lib/sysusers.d/telemonitor.conf", "cmon")
        has(cmon, "/usr/lib/tmpfiles.d/telemonitor.conf", "cmon")
        has(cmon, "/usr/share/cmon/web/index.html", "cmon")
        has(cmon, "/usr/share/doc/cmon/examples/telemonrc", "cmon")
        has(cmon, "/usr/share/doc/cmon/examples/fsread.pspec", "cmon")
        has(cmon, "/etc/cmon/telemonrc", "cmon")
        check(not any(p.startswith("/etc/cmon/") and p != "/etc/cmon/telemonrc" for p in cmon),
              "/etc/cmon holds more than the neutral telemonrc: %r",
              [p for p in cmon if p.startswith("/etc/cmon")])
        for doc in DOCS:
            has(cmon, "/usr/share/doc/cmon/" + re.escape(doc), "cmon")
        has(cmon, "/usr/share/man/man8/telemonreg.8.gz", "cmon")
        has(cmon, "/usr/share/man/man8/telemonitor.8.gz", "cmon")
        has(cmon, "/usr/share/man/man1/pcheck.1.gz", "cmon")
        has(cmon, "/usr/share/man/man1/pinfer.1.gz", "cmon")
        has(cmon, "/usr/share/man/man5/telemonrc.5.gz", "cmon")
        check(not any("telemonreg.1" in p for p in cmon), "telemonreg.1 still packaged")
        check(not any("libcmon" in p for p in cmon), "cmon holds the library")
        lib = contents(debs["libcmon0"])
        has(lib, r"/usr/lib/[^/]+/libcmon\.so\.0", "libcmon0")
        has(lib, r"/usr/lib/[^/]+/libcmon\.so\.0\.1\.0", "libcmon0")
        check(not any(p.endswith("libcmon.so") or p.endswith(".a") for p in lib),
              "libcmon0 holds development files")
        dev = contents(debs["libcmon-dev"])
        for pattern in [r"/usr/include/cmon/emit\.h", r"/usr/lib/[^/]+/libcmon\.so",
                        r"/usr/lib/[^/]+/libcmon\.a", r"/usr/lib/[^/]+/pkgconfig/cmon\.pc",
                        r"/usr/lib/[^/]+/cmake/cmon/cmon-config\.cmake",
                        r"/usr/lib/[^/]+/cmake/cmon/cmon-config-version\.cmake",
                        r"/usr/share/man/man3/cmon_emit\.3\.gz",
                        r"/usr/share/man/man3/cmon_init\.3\.gz"]:
            has(dev, pattern, "libcmon-dev")
        # A page for every function the library exports (its symbols file).
        symbols = run(["dpkg-deb", "-I", debs["libcmon0"], "symbols"])
        exported = re.findall(r"^ (cmon_[a-z_]+)@Base", symbols, re.M)
        check(len(exported) >= 9, "symbols: %r", exported)
        for fn in exported:
            has(dev, r"/usr/share/man/man3/%s\.3\.gz" % fn, "libcmon-dev")

        # Control fields.
        conffiles = run(["dpkg-deb", "-I", debs["cmon"], "conffiles"]).split()
        check("/etc/cmon/telemonrc" in conffiles, "conffiles: %r", conffiles)
        dep = {n: run(["dpkg-deb", "-f", d, "Depends"]).strip() for n, d in debs.items()}
        for want in ["libc6", "libevent", "libsqlite3", "libsystemd0", "libjs-chart.js",
                     "systemd-sysusers"]:
            check(want in dep["cmon"], "cmon Depends lacks %s: %s", want, dep["cmon"])
        check("libcmon0" not in dep["cmon"], "cmon depends on libcmon0: %s", dep["cmon"])
        check(re.search(r"\blibc6 \(>= [0-9.]+\)", dep["libcmon0"]), "libcmon0: %s", dep["libcmon0"])
        check("libcmon0 (= 0.1.0-1)" in dep["libcmon-dev"], "libcmon-dev: %s", dep["libcmon-dev"])
        postinst = run(["dpkg-deb", "-I", debs["cmon"], "postinst"])
        su, tf = postinst.find("systemd-sysusers"), postinst.find("systemd-tmpfiles")
        check(0 <= su < tf, "postinst must create the cmon user before tmpfiles:\n%s", postinst)

        # lintian: nothing but the overridden tags.
        out = run(["lintian", "-I", "--pedantic"] + list(debs.values()), timeout=300, ok=(0, 1, 2))
        tags = [line for line in out.splitlines() if re.match(r"^[EWIPX]: ", line)]
        check(not tags, "lintian:\n%s", "\n".join(tags))

        # Extracted into one root, the programs run and libcmon-dev works.
        root = env.path("root")
        for d in debs.values():
            run(["dpkg-deb", "-x", d, root])
        libdir = os.path.dirname(glob.glob(os.path.join(root, "usr/lib/*/libcmon.so.0"))[0])
        e = dict(os.environ, LD_LIBRARY_PATH=libdir)
        out = run([os.path.join(root, "usr/bin/pcheck"), "--version"], env=e)
        check("0.1.0" in out, "pcheck --version: %s", out)
        # The service reads the packaged configuration, which tmpfiles.d
        # gives to the group cmon.
        unit = open(glob.glob(os.path.join(root, "*lib/systemd/system/telemonitor.service"))[0]).read()
        check("Environment=TELEMONRC=/etc/cmon/telemonrc" in unit, "telemonitor.service:\n%s", unit)
        check("\nExecReload=/bin/kill -HUP $MAINPID\n" in unit, "no reload: %s", unit)
        check("ReadWritePaths=/etc/cmon" not in unit, "the service may write /etc/cmon")
        tmpf = open(os.path.join(root, "usr/lib/tmpfiles.d/telemonitor.conf")).read()
        check(re.search(r"^d /etc/cmon 0750 root cmon", tmpf, re.M)
              and re.search(r"^z /etc/cmon/telemonrc 0640 root cmon", tmpf, re.M), "tmpfiles: %s", tmpf)
        rc = os.path.join(root, "etc/cmon/telemonrc")
        out = run([os.path.join(root, "usr/bin/telemonitor"), "-check", "-rc", rc], env=e)
        check("configuration OK (0 classes)" in out, "telemonitor -check: %s", out)
        man_references(root)
        services_start_idle(env, root, e)

        # cmon.pc says prefix=/usr (its system flags then go): point it at the root.
        pc = dict(e, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        check(run(["pkg-config", "--variable=prefix", "cmon"], env=pc).strip() == "/usr",
              "cmon.pc's prefix is not /usr")
        flags = run(["pkg-config", "--define-variable=prefix=" + os.path.join(root, "usr"),
                     "--cflags", "--libs", "cmon"], env=pc).split()
        exe = env.path("emit3-pc")
        run(["cc", "-o", exe, os.path.join(PKG, "emit3.c")] + flags)
        log = env.path("pc.log")
        run([exe], env=dict(e, CMON_LOG=log))
        out = run([os.path.join(root, "usr/bin/pcheck"), "-s", os.path.join(PKG, "tick.pspec"), log], env=e)
        check(out.count("held") == 2, "pkg-config client: %s", out)

        examples_build(env, root, e, pc)

        proj = env.path("proj")
        shutil.copytree(PKG, proj)
        run(["cmake", "-S", proj, "-B", os.path.join(proj, "build"),
             "-DCMAKE_PREFIX_PATH=" + os.path.join(root, "usr")])
        run(["cmake", "--build", os.path.join(proj, "build")])
        for exe in ["emit3", "emit3-static"]:
            log = env.path(exe + ".log")
            run([os.path.join(proj, "build", exe)], env=dict(e, CMON_LOG=log))
            out = run([os.path.join(root, "usr/bin/pcheck"), "-s",
                       os.path.join(PKG, "tick.pspec"), log], env=e)
            check(out.count("held") == 2, "CMake client %s: %s", exe, out)
        # libpspec-dev: find_package(pspec) -> pspec::pspec, against libpspec0
        out = run([os.path.join(proj, "build", "pspec_tiny")], env=e, ok=(1,))
        check('assertion "n never negative" failed (1 offender)' in out and
              'assertion "three ticks" held' in out and out.rstrip().endswith("threads agree"),
              "CMake client of libpspec: %s", out)
        check(glob.glob(os.path.join(libdir, "libpspec.so.0")), "libpspec0 holds libpspec.so.0")

        # The units, with their paths pointed into the root.
        if shutil.which("systemd-analyze"):
            units = env.path("units")
            os.mkdir(units)
            for u in glob.glob(os.path.join(root, "lib/systemd/system/*")) + \
                    glob.glob(os.path.join(root, "usr/lib/systemd/system/*")):
                with open(u) as f:
                    text = f.read().replace("/usr/bin/", os.path.join(root, "usr/bin/"))
                with open(os.path.join(units, os.path.basename(u)), "w") as f:
                    f.write(text)
            paths = sorted(glob.glob(os.path.join(units, "*")))
            check(len(paths) == 3, "units: %r", paths)
            run(["systemd-analyze", "verify", "--man=no"] + paths,
                env=dict(os.environ, SYSTEMD_LOG_LEVEL="notice"))
        else:
            print("no systemd-analyze: the units were not verified")


ct.run_test(main)
