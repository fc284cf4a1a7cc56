"""cmake --install: everything lands under the prefix (--prefix P, and
DESTDIR=D), nothing outside it; the installed tree can be moved; a client
program builds against the moved tree both with pkg-config and with
find_package(cmon) (cmon::cmon and cmon::cmon_static), and the log it
writes with libcmon checks with the built pcheck. The same for libpspec
(libpspec.so.0, exporting only pspec_*): a program built against it with
pkg-config pspec and with find_package(pspec) (pspec::pspec) checks a tiny
spec over a tiny log, on one thread and on two."""
import glob
import os
import re
import shutil
import subprocess

import cmontest as ct
from cmontest import check

PKG = os.path.join(ct.HERE, "pkg")


def run(argv, env=None, cwd=None):
    """Runs argv; fails the test with its output when it fails."""
    p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    check(p.returncode == 0, "%s: exit %d\n%s", " ".join(argv), p.returncode,
          p.stdout.decode(errors="replace"))
    return p.stdout.decode(errors="replace")


def cache_vars():
    """The build tree's CMakeCache.txt as a dict."""
    out = {}
    with open(os.path.join(ct.BUILD, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                out[m.group(1)] = m.group(2)
    return out


def tree(root):
    """Every file and symbolic link under root, as paths relative to it."""
    found = set()
    for d, _dirs, files in os.walk(root):
        for f in files:
            found.add(os.path.relpath(os.path.join(d, f), root))
    return found


def install(env, prefix=None, destdir=None):
    """cmake --install into prefix or DESTDIR; returns the manifest."""
    e = dict(os.environ)
    argv = ["cmake", "--install", ct.BUILD]
    if prefix:
        argv += ["--prefix", prefix]
    if destdir:
        e["DESTDIR"] = destdir
    run(argv, env=e)
    with open(os.path.join(ct.BUILD, "install_manifest.txt")) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def one(root, pattern):
    hits = glob.glob(os.path.join(root, pattern))
    check(len(hits) == 1, "%s: expected one match under %s, got %r", pattern, root, hits)
    return hits[0]


def emit_and_check(env, exe, tag, libdir=None):
    """Runs a built client with CMON_LOG set and checks its log with pcheck."""
    log = env.path("%s.log" % tag)
    e = dict(os.environ, CMON_LOG=log)
    e.pop("CMON_LOG_FD", None)
    if libdir:
        e["LD_LIBRARY_PATH"] = libdir
    run([exe], env=e)
    out = run([ct.binary("pcheck"), "-s", os.path.join(PKG, "tick.pspec"), log])
    check(out.count("held") == 2 and "failed" not in out, "%s: pcheck said:\n%s", tag, out)


def pspec_tiny(exe, tag, libdir):
    """Runs pspec_tiny.c built against the installed libpspec: one assertion
    fails for one Tick, the other holds, two threads agree with one."""
    p = subprocess.run([exe], env=dict(os.environ, LD_LIBRARY_PATH=libdir),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 1, "%s: pspec_tiny exit %d (want 1: an assertion failed)\n%s",
          tag, p.returncode, out)
    check('assertion "n never negative" failed (1 offender)' in out
          and '"n never negative" failed for Tick 2.0 ts 200 thread 1: n = -1' in out
          and 'assertion "three ticks" held' in out
          and out.rstrip().endswith("threads agree"), "%s: pspec_tiny said:\n%s", tag, out)


def main():
    cache = cache_vars()
    cc = cache.get("CMAKE_C_COMPILER") or "cc"
    # A sanitizer build's libcmon needs its runtime in the client too.
    san = ["-fsanitize=address,undefined"] if cache.get("CMON_SANITIZE") == "ON" else []
    with ct.Env("install_prefix") as env:
        # 1. --prefix: the manifest and the tree agree, all under the prefix.
        prefix = env.path("prefix")
        manifest = install(env, prefix=prefix)
        outside = [m for m in manifest if not m.startswith(prefix + "/")]
        check(not outside, "installed outside the prefix %s: %r", prefix, outside)
        files = tree(prefix)
        check(files == {os.path.relpath(m, prefix) for m in manifest},
              "tree and manifest differ: %r", files ^ {os.path.relpath(m, prefix) for m in manifest})
        for want in ["bin/pcheck", "bin/telemonitor", "bin/telemonreg", "bin/snarflog",
                     "bin/telemonctl", "bin/cmon-wrap", "bin/cmon-log", "bin/peval", "bin/psolve",
                     "include/cmon/emit.h",
                     "lib/systemd/system/telemonitor.service",
                     "lib/systemd/system/telemonreg.service",
                     "lib/systemd/system/telemonreg.socket",
                     "lib/sysusers.d/telemonitor.conf", "lib/tmpfiles.d/telemonitor.conf",
                     "etc/cmon/telemonrc",
                     "share/doc/cmon/examples/telemonrc", "share/doc/cmon/examples/fsread.pspec",
                     "share/cmon/web/index.html",
                     "share/man/man8/telemonreg.8", "share/man/man8/telemonitor.8",
                     "share/man/man3/cmon_emit.3"]:
            check(want in files, "not installed: %s", want)
        check(not any(f.endswith("telemonreg.1") for f in files), "telemonreg.1 still installed")
        for pattern in ["lib*/libcmon.so.0", "lib*/libcmon.a", "lib*/pkgconfig/cmon.pc",
                        "lib*/cmake/cmon/cmon-config.cmake",
                        "lib*/cmake/cmon/cmon-config-version.cmake",
                        "include/pspec/pspec.h", "lib*/libpspec.so", "lib*/libpspec.so.0",
                        "lib*/pkgconfig/pspec.pc", "lib*/cmake/pspec/pspec-config.cmake",
                        "lib*/cmake/pspec/pspec-config-version.cmake",
                        "lib*/cmake/pspec/pspec-targets.cmake"]:
            one(prefix, pattern)
        # libpspec: its SONAME, and nothing exported but the pspec_* API.
        so = one(prefix, "lib*/libpspec.so.0")
        check("SONAME               libpspec.so.0" in run(["objdump", "-p", so]), "libpspec SONAME")
        syms = run(["nm", "-D", "--defined-only", so]).split("\n")
        names = [line.split()[-1] for line in syms if line.strip()]
        # (a libFuzzer build's coverage sections add __start_/__stop_ bounds)
        others = [n for n in names if not n.startswith("pspec_") and
                  not (cache.get("CMON_FUZZ") == "ON" and
                       n.startswith(("__start___sancov", "__stop___sancov")))]
        check(len(names) >= 30 and not others, "libpspec exports more than pspec_*: %r", others)
        check(not glob.glob(os.path.join(prefix, "lib*/libpspec.a")), "libpspec.a installed")
        # An alias page for every function of the header.
        with open(os.path.join(ct.SOURCE, "libcmon/include/cmon/emit.h")) as f:
            fns = re.findall(r"CMON_API[^;(]*?[ *](cmon_[a-z_]+)\(", f.read())
        check(len(fns) >= 9, "functions found in emit.h: %r", fns)
        for fn in fns:
            page = os.path.join(prefix, "share/man/man3/%s.3" % fn)
            check(os.path.exists(page), "no man page for %s", fn)
            if fn != "cmon_emit":
                check(open(page).read() == ".so man3/cmon_emit.3\n", "%s.3 is not an alias", fn)
        # The units: the service only reads /etc/cmon.
        with open(os.path.join(prefix, "lib/systemd/system/telemonitor.service")) as f:
            unit = f.read()
        check("ReadWritePaths=/etc/cmon" not in unit and "ConfigurationDirectoryMode=0770" not in unit,
              "telemonitor.service still writes its configuration folder")
        check("man:telemonreg(8)" in open(os.path.join(
            prefix, "lib/systemd/system/telemonreg.service")).read(), "telemonreg.service docs")
        with open(os.path.join(prefix, "lib/tmpfiles.d/telemonitor.conf")) as f:
            tmpf = f.read()
        check(re.search(r"^d \S+/cmon 0750 root cmon", tmpf, re.M)
              and re.search(r"^z \S+/cmon/telemonrc 0640 root cmon", tmpf, re.M),
              "tmpfiles.d: %s", tmpf)

        # 2. DESTDIR: the same files under DESTDIR + the configured prefix.
        dest = env.path("dest")
        manifest = install(env, destdir=dest)
        # (The manifest names the files without DESTDIR.)
        conf_prefix = cache["CMAKE_INSTALL_PREFIX"].rstrip("/")
        outside = [m for m in manifest if not m.startswith(conf_prefix + "/")]
        check(not outside, "installed outside the prefix %s: %r", conf_prefix, outside)
        in_dest = tree(dest)
        check(in_dest == {m.lstrip("/") for m in manifest}, "DESTDIR tree and manifest differ: %r",
              in_dest ^ {m.lstrip("/") for m in manifest})
        check(in_dest == {os.path.join(conf_prefix.lstrip("/"), f) for f in files},
              "DESTDIR tree differs from the --prefix tree")
        # The service and tmpfiles.d name the configuration where it landed.
        rc = re.search(r"^Environment=TELEMONRC=(\S+)$", unit, re.M).group(1)
        check(os.path.isfile(dest + rc), "the unit's TELEMONRC %s was not installed", rc)
        check(re.search(r"^z %s 0640 root cmon" % re.escape(rc), tmpf, re.M), "tmpfiles: %s", tmpf)
        exe = re.search(r"^ExecStart=(\S+)", unit, re.M).group(1)
        check(os.access(dest + exe, os.X_OK), "the unit's ExecStart %s was not installed", exe)

        # 3. Move the tree: pkg-config and CMake must still find it there.
        moved = env.path("moved")
        shutil.move(prefix, moved)
        libdir = os.path.dirname(one(moved, "lib*/libcmon.so.0"))
        pcdir = os.path.dirname(one(moved, "lib*/pkgconfig/cmon.pc"))
        e = dict(os.environ, PKG_CONFIG_PATH=pcdir)
        flags = run(["pkg-config", "--cflags", "--libs", "cmon"], env=e).split()
        check(any(os.path.realpath(f[2:]) == os.path.realpath(os.path.join(moved, "include"))
                  for f in flags if f.startswith("-I")), "pkg-config cflags: %r", flags)
        check(run(["pkg-config", "--modversion", "cmon"], env=e).strip() == "0.1.0", "modversion")
        exe = env.path("emit3-pc")
        run([cc] + san + ["-o", exe, os.path.join(PKG, "emit3.c")] + flags)
        emit_and_check(env, exe, "pkgconfig", libdir=libdir)
        # libpspec through pkg-config
        pflags = run(["pkg-config", "--cflags", "--libs", "pspec"], env=e).split()
        check(run(["pkg-config", "--modversion", "pspec"], env=e).strip() == "0.1.0", "pspec modversion")
        exe = env.path("pspec_tiny-pc")
        run([cc] + san + ["-o", exe, os.path.join(PKG, "pspec_tiny.c"), "-pthread"] + pflags)
        pspec_tiny(exe, "pkgconfig", libdir)

        proj = env.path("proj")
        shutil.copytree(PKG, proj)
        cfg = ["cmake", "-S", proj, "-B", os.path.join(proj, "build"),
               "-DCMAKE_PREFIX_PATH=" + moved, "-DCMAKE_C_COMPILER=" + cc]
        if san:
            cfg += ["-DCMAKE_C_FLAGS=" + " ".join(san)]
        run(cfg)
        run(["cmake", "--build", os.path.join(proj, "build")])
        emit_and_check(env, os.path.join(proj, "build", "emit3"), "cmake", libdir=libdir)
        # The static one needs no libcmon.so at run time.
        emit_and_check(env, os.path.join(proj, "build", "emit3-static"), "cmake-static")
        # libpspec through find_package(pspec): pspec::pspec
        pspec_tiny(os.path.join(proj, "build", "pspec_tiny"), "cmake", libdir)


ct.run_test(main)
