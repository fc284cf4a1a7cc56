"""A real PostgreSQL server for a test: Debian's postgresql-15 (installed by
scripts/deps.sh), in the test's temporary directory, on 127.0.0.1 and a
free port, with fsync off and trust authentication for user `cmon`.

    srv = pgserver.start(env)          # or cmontest.skip() with the reason
    url = srv.createdb("t1")           # postgresql://cmon@127.0.0.1:PORT/t1
    srv.kill()                         # kill -9 the postmaster
    srv.restart()                      # start it again on the same port
    srv.sql("t1", "SELECT count(*) FROM failures")   # psql -At

initdb refuses to run as root, so as root the server runs as the
`postgres` user the package creates (setuid in the child, so the test's
child is the postmaster itself and kill -9 reaches it), in a directory it
owns.

Run as a script, it wraps a command: `pgserver.py CMD ARGS...` starts a
server, runs CMD with CMON_TEST_PG_URL set to a fresh database's URL and
exits with CMD's status (77, skipped, if no server can be started).
"""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import cmontest

USER = "cmon"


def bindir():
    """Directory of PostgreSQL's server programs, or None."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "postgres")):
            return d
    return None


class Server:
    def __init__(self, topdir):
        self.bindir = bindir()
        self.dir = os.path.join(topdir, "pg")
        self.data = os.path.join(self.dir, "data")
        self.port = cmontest.free_port()
        self.proc = None
        self.extra = []          # more -c settings (a benchmark's pg_stat_statements)
        self.as_user = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
                self.as_user = "postgres"
            except KeyError:
                pass

    def _preexec(self):
        """In the child: become the server's user (as root), die with the test."""
        cmontest.die_with_parent()
        if self.as_user:
            pw = pwd.getpwnam(self.as_user)
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)

    def init(self):
        os.makedirs(self.dir, exist_ok=True)
        if self.as_user:
            pw = pwd.getpwnam(self.as_user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            # the server must reach its directory through the test's
            os.chmod(os.path.dirname(self.dir), 0o755)
        r = subprocess.run([os.path.join(self.bindir, "initdb"), "-D", self.data, "-A", "trust",
                            "-U", USER, "-E", "UTF8", "--no-sync", "--locale=C"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                           preexec_fn=self._preexec, cwd=self.dir)
        if r.returncode != 0:
            return "initdb failed: %s" % r.stdout.decode(errors="replace")[-600:]
        return None

    def start(self, timeout=30.0):
        """Start the postmaster in the foreground (a child we can kill -9)."""
        log = open(os.path.join(self.dir, "server.log"), "ab")
        argv = [os.path.join(self.bindir, "postgres"), "-D", self.data,
                "-c", "listen_addresses=127.0.0.1", "-p", str(self.port),
                "-c", "unix_socket_directories=" + self.dir,
                "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "max_connections=50",
                "-c", "shared_buffers=16MB"] + self.extra
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, preexec_fn=self._preexec,
                                     cwd=self.dir)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "postgres exited: %s" % self.log()[-600:]
            r = subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                return None
            time.sleep(0.1)
        return "postgres did not accept connections within %.0f s" % timeout

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def url(self, db):
        return "postgresql://%s@127.0.0.1:%d/%s" % (USER, self.port, db)

    def sql(self, db, query):
        """Run `query` with psql; its unaligned, tuples-only output."""
        r = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", self.url(db),
                            "-c", query], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        if r.returncode != 0:
            raise cmontest.TestFailure("psql %r: %s" % (query, r.stderr.decode(errors="replace")))
        return r.stdout.decode()

    def createdb(self, name):
        """A new empty database; its URL."""
        self.sql("postgres", 'CREATE DATABASE "%s"' % name)
        return self.url(name)

    def kill(self):
        """kill -9 the postmaster (its backends end with it)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)      # fast shutdown
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self):
        # a killed postmaster leaves its backends exiting for a moment
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(os.path.join(self.data,
                                                                          "postmaster.pid")):
            try:
                with open(os.path.join(self.data, "postmaster.pid")) as f:
                    pid = int(f.readline())
                os.kill(pid, 0)
            except (OSError, ValueError):
                break
            time.sleep(0.05)
        why = self.start()
        if why:
            raise cmontest.TestFailure("postgres did not restart: %s" % why)


def unavailable():
    """Why no server can be started here, or None."""
    if not bindir():
        return "PostgreSQL's server is not installed (postgresql-15; scripts/deps.sh installs it)"
    if not shutil.which("pg_isready") or not shutil.which("psql"):
        return "psql/pg_isready not found (postgresql-client)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    return None


def start(env, extra=()):
    """A running server in env's directory (stopped when env ends), or skip;
    `extra`: more settings, as "-c", "name=value" pairs."""
    why = unavailable()
    if why:
        cmontest.skip(why)
    srv = Server(env.dir)
    srv.extra = list(extra)
    why = srv.init() or srv.start()
    if why:
        cmontest.skip("cannot start PostgreSQL: %s" % why)
    env.cleanups = getattr(env, "cleanups", [])
    env.cleanups.append(srv.stop)
    return srv


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: pgserver.py CMD [ARG...]\n")
        sys.exit(2)
    why = unavailable()
    if why:
        cmontest.skip(why)
    top = tempfile.mkdtemp(prefix="cmon-pg-")
    srv = Server(top)
    try:
        why = srv.init() or srv.start()
        if why:
            cmontest.skip("cannot start PostgreSQL: %s" % why)
        env = dict(os.environ, CMON_TEST_PG_URL=srv.createdb("cmontest"))
        r = subprocess.run(sys.argv[1:], env=env)
        sys.exit(r.returncode)
    finally:
        srv.stop()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
