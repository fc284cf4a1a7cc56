"""The names from the original manual pages and DESIGN.md §6, as a user
would type them: every program answers --help and --version; snarflog
finds the registry through TELEMONREG_MACHINE (host:port, and an IPv6
literal in brackets), accepts -regname / TELEMONREG_NAME (no effect) and
--buffer (a size below 4K is raised to 4K); telemonitor reads its configuration from $TELEMONRC or
~/.telemonrc and its state directory from $TELEMON_STATE, which telemonctl
uses too, and also finds the registry through TELEMONREG_MACHINE. One
telemonitor per state directory: a second one is refused and the first
keeps its control socket. An instance that goes away without being
monitored says so in its status. cmon-wrap finds snarflog in its build
tree when $PATH has none."""
import json
import os
import socket
import stat
import subprocess

import cmontest as ct
from cmontest import check

PROGRAMS = ("telemonreg", "snarflog", "telemonitor", "telemonctl", "cmon-wrap")


def run(argv, env=None, timeout=30, cwd=None):
    full = dict(os.environ)
    full.pop("TELEMONREG_MACHINE", None)
    if env:
        full.update(env)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full,
                       timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def help_and_version():
    for name in PROGRAMS:
        rc, out, err = run([ct.binary(name), "--help"])
        check(rc == 0 and "usage" in out.lower(), "%s --help: %d %r %r", name, rc, out, err)
        rc, out, err = run([ct.binary(name), "--version"])
        check(rc == 0 and out.startswith(name + " ") and any(c.isdigit() for c in out),
              "%s --version: %d %r %r", name, rc, out, err)


def ipv6_registry(env):
    """telemonreg on [::1]:0, or None when this host has no IPv6 loopback."""
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
    except OSError:
        return None
    portfile = env.unique("reg6.port")
    proc = env.spawn("telemonreg", [ct.binary("telemonreg"), "-listen", "[::1]:0",
                                    "-portfile", portfile])
    proc.port = int(ct.wait_file(portfile, 10).strip())
    return proc


def snarflog_env(env, name, extra_env, *args):
    """snarflog NAME ARGS -- sleep, finding the registry from the environment only."""
    gate = env.unique("gate")
    argv = [ct.binary("snarflog"), name] + list(args) + [
        "--", "sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done', gate]
    return env.spawn("snarflog", argv, env=extra_env), gate


def registry_from_environment(env, reg):
    watch = env.watch("-prog", "envprog*", reg=reg)
    watch.expect("ack")
    snarf, gate = snarflog_env(env, "envprog1",
                               {"TELEMONREG_MACHINE": reg.addr(), "TELEMONREG_NAME": "Other"},
                               "-regname", "TelemonRegistry", "--buffer", "65536", "-ascii")
    words = watch.expect("up")
    check(words[2] == "envprog1", "up: %r", words)
    open(gate, "w").close()
    check(snarf.wait(20) == 0, "snarflog: %s", snarf.stderr())
    watch.expect("gone", clean=1)

    reg6 = ipv6_registry(env)
    if reg6 is None:
        print("no IPv6 loopback here: [::1] part skipped")
        return None
    watch6 = env.watch("-prog", "envprog*", reg=Ipv6Addr(reg6))
    watch6.expect("ack")
    snarf, gate = snarflog_env(env, "envprog6",
                               {"TELEMONREG_MACHINE": "[::1]:%d" % reg6.port})
    words = watch6.expect("up")
    check(words[2] == "envprog6", "up over IPv6: %r", words)
    open(gate, "w").close()
    check(snarf.wait(20) == 0, "snarflog: %s", snarf.stderr())
    return reg6


class Ipv6Addr:
    """What Proc.addr() gives, for a registry on [::1]."""

    def __init__(self, proc):
        self.port = proc.port

    def addr(self):
        return "[::1]:%d" % self.port


def telemonitor_from_environment(env, reg, reg6):
    state = env.path("envstate")
    rcfile = env.path("env.rc")
    with open(rcfile, "w") as f:
        f.write('(defaults (tool "cat") (auto FALSE))\n(class (prog "envman"))\n')
    # $TELEMONRC, $TELEMON_STATE and $TELEMONREG_MACHINE instead of switches
    tenv = {"TELEMONRC": rcfile, "TELEMON_STATE": state,
            "TELEMONREG_MACHINE": reg.addr() if reg6 is None else Ipv6Addr(reg6).addr()}
    tm = env.spawn("telemonitor", [ct.binary("telemonitor"), "-pcheck", ct.binary("pcheck"),
                                   "-debug"], env=tenv)
    ctl_env = {"TELEMON_STATE": state}

    def ready():
        if not tm.alive():
            raise ct.TestFailure("telemonitor exited: %s" % tm.stderr())
        return run([ct.binary("telemonctl"), "status"], env=ctl_env)[0] == 0
    ct.wait_for(ready, 15, "telemonitor started from the environment")
    rc, out, err = run([ct.binary("telemonctl"), "classes", "--json"], env=ctl_env)
    check(rc == 0 and '"envman"' in out, "classes from $TELEMONRC: %d %r %r", rc, out, err)
    ct.wait_for(lambda: '"registry_state":"connected"' in
                run([ct.binary("telemonctl"), "--json", "status"], env=ctl_env)[1],
                15, "the registry named by $TELEMONREG_MACHINE")

    # one telemonitor per state directory
    rc, out, err = run([ct.binary("telemonitor"), "-rc", rcfile, "-state", state,
                        "-regmachine", "127.0.0.1:9"], timeout=20)
    check(rc == 1 and "another telemonitor (pid %d)" % tm.p.pid in err,
          "second telemonitor on the same state: %d %r", rc, err)
    check(tm.alive(), "the first telemonitor is still running")
    check(stat.S_ISSOCK(os.stat(os.path.join(state, "control.sock")).st_mode),
          "the control socket is still there")
    rc, out, err = run([ct.binary("telemonctl"), "status"], env=ctl_env)
    check(rc == 0 and "pid %d" % tm.p.pid in out, "the first still answers: %d %r %r",
          rc, out, err)

    # an instance only listed that ends: its status says so
    if reg6 is None:
        snarf, gate = snarflog_env(env, "envman", {"TELEMONREG_MACHINE": reg.addr()})
    else:
        snarf, gate = snarflog_env(env, "envman", {"TELEMONREG_MACHINE": "[::1]:%d" % reg6.port})

    def instances():
        return json.loads(run([ct.binary("telemonctl"), "instances", "--all",
                                             "--json"], env=ctl_env)[1])
    inst = ct.wait_for(lambda: [i for i in instances() if i["prog"] == "envman"], 15,
                       "the envman instance listed")[0]
    check(inst["state"] == "listed", "listed: %r", inst)
    open(gate, "w").close()
    check(snarf.wait(20) == 0, "snarflog: %s", snarf.stderr())
    gone = ct.wait_for(lambda: [i for i in instances()
                                if i["id"] == inst["id"] and i["state"] == "gone"],
                       15, "the envman instance gone")[0]
    check("start it" not in gone["status"] and "not monitored" in gone["status"],
          "status of a gone instance: %r", gone)
    tm.signal(15)
    check(tm.wait(20) == 0, "telemonitor: %s", tm.stderr())

    # ~/.telemonrc when neither -rc nor $TELEMONRC is given
    home = env.path("home")
    os.mkdir(home)
    with open(os.path.join(home, ".telemonrc"), "w") as f:
        f.write('(class (prog "fromhome") (tool "cat"))\n')
    rc, out, err = run([ct.binary("telemonitor"), "-check"],
                       env={"HOME": home, "TELEMONRC": ""})
    check(rc == 0 and ".telemonrc" in out and "1 classes" in out,
          "~/.telemonrc: %d %r %r", rc, out, err)


def cmon_wrap_without_path(env):
    prog = env.path("wrapme")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\nexit 6\n")
    os.chmod(prog, 0o755)
    rc, out, err = run([ct.binary("cmon-wrap"), prog], env={"PATH": "/usr/bin:/bin"})
    check(rc == 0, "cmon-wrap with no snarflog in PATH: %d %r", rc, err)
    with open(prog) as f:
        script = f.read()
    check(ct.binary("snarflog") in script, "the build tree's snarflog: %r", script)
    rc, _, err = run([prog], env={"TELEMONREG_MACHINE": "127.0.0.1:9"})
    check(rc == 6, "the wrapped program's status: %d %r", rc, err)


def buffer_sizes():
    """-buffer below the smallest size is raised to it with a warning (the
    log still goes through); beyond 1G or not a size is a usage error."""
    log = b"#cmon-ascii 1\n" + b"".join(b"%d 1 E %d\n" % (i, i) for i in range(100))
    for size in ("1000", "0", "4K"):
        p = subprocess.run([ct.binary("snarflog"), "small", "-standalone", "-buffer", size],
                           input=log, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 0, "-buffer %s: %d %r", size, p.returncode, err)
        check(("using 4K" in err) == (size != "4K"), "-buffer %s warning: %r", size, err)
    for size in ("2G", "lots", "-5"):
        rc, _, err = run([ct.binary("snarflog"), "x", "-standalone", "-buffer", size])
        check(rc == 2 and "-buffer" in err, "-buffer %s: %d %r", size, rc, err)


def main():
    help_and_version()
    buffer_sizes()
    with ct.Env("env_switches") as env:
        reg = env.registry()
        reg6 = registry_from_environment(env, reg)
        telemonitor_from_environment(env, reg, reg6)
        cmon_wrap_without_path(env)


ct.run_test(main)
