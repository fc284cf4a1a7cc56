"""The telemonitor on PostgreSQL (Debian's postgresql-15, started by the
test on 127.0.0.1 in its temporary directory; skipped, never passed, where
it cannot start).

  store        -store URL: the failures of an instance are stored in the
               server (counted there with psql, and read back by telemonctl
               and the HTTP API); `telemonctl status --json` names the
               engine; the configuration's (store "URL") does the same.
  server kill  the server is killed with SIGKILL while failures come in:
               they are held in memory (store.state "degraded", reason
               "server gone", pending_failures == K), and once the server
               is back every one of them is stored, exactly once, with the
               earlier ones kept; the outage is counted and recorded in
               store_outages.
  restart      the telemonitor stopped and started on the same database
               finds its failures and instances there, and ids go on.
  bad target   -store with something not a postgresql:// URL is a usage
               error (exit 2), and so is an empty -node; (store PATH) in
               telemonrc is a configuration error naming its line (exit 2);
               a server that does not answer is a start failure (exit 1)
               whose message names the URL, password masked.
"""
import subprocess

import cmontest as ct
import pgserver
import telemontest as tt
from cmontest import check
from test_store_faults import produce, spans, store, wait_held, wait_ok


def count(srv, db, sql):
    return int(srv.sql(db, sql).strip() or 0)


def main():
    with ct.Env("telemon_pg") as env:
        srv = pgserver.start(env)
        url = srv.createdb("tm")
        reg = env.registry()
        rc = tt.rc_class("pgf", spec=tt.FSREAD_SPEC, window="10 after 3")
        tm = tt.Telemonitor(env, reg, rc, name="pg", extra=["-store", url,
                                                             "-http", "127.0.0.1:0"])
        st = tm.json("status")
        check(st["store"]["state"] == "ok" and st["store"].get("engine") == "postgresql",
              "status names the engine: %r", st["store"])
        check("store: created postgresql postgresql://cmon@127.0.0.1:%d/tm (schema " % srv.port
              in tm.stderr(), "creation logged: %s", tm.stderr()[-2000:])

        # stored in the server
        bad = produce(env, reg, "pgf", 3)
        got = tm.wait_failures(3)
        check(spans(got) == sorted(bad), "3 failures: %r", got)
        check(count(srv, "tm", "SELECT count(*) FROM failures") == 3, "3 rows in PostgreSQL")
        check(count(srv, "tm", "SELECT count(*) FROM windows") == 3, "3 windows in PostgreSQL")
        check(len(tm.http_json("/api/v1/failures")["failures"]) == 3, "the HTTP API reads them")
        inst = tm.instance(lambda i: i["prog"] == "pgf" and i["state"] in ("ended", "gone"))
        check(inst["failures"] == 3, "instance counts 3 failures: %r", inst)

        # the server killed while failures come in
        srv.kill()
        k = 4
        bad2 = produce(env, reg, "pgf", k)
        s = wait_held(tm, k, "server killed")
        check(s["reason"] == "server gone" and s["pending_failures"] == k and s["dropped"] == 0,
              "held while the server is gone: %r", s)
        check("store degraded: server gone" in tm.stderr(), "the loud line: %s",
              tm.stderr()[-3000:])
        srv.restart()
        s = wait_ok(tm, "server back")
        check(s["pending"] == 0 and s["dropped"] == 0 and s["outages"] == 1, "recovered: %r", s)
        got = tm.failures()
        check(len(got) == 3 + k and spans(got) == sorted(bad + bad2),
              "every failure stored exactly once: %r", got)
        check(count(srv, "tm", "SELECT count(*) FROM failures") == 3 + k,
              "%d rows in PostgreSQL" % (3 + k))
        check(srv.sql("tm", "SELECT reason, failures, dropped FROM store_outages").strip() ==
              "server gone|%d|0" % k, "outage recorded: %r",
              srv.sql("tm", "SELECT * FROM store_outages"))
        check("connected to postgresql://cmon@127.0.0.1:%d/tm again" % srv.port in tm.stderr(),
              "reconnect logged: %s", tm.stderr()[-2000:])
        ids = sorted(f["id"] for f in got)
        tm.stop()

        # the configuration's (store "URL"), and a restart on the same data
        rc2 = '(defaults (store "%s"))\n' % url + rc
        tm2 = tt.Telemonitor(env, reg, rc2, name="pg2")
        check(sorted(f["id"] for f in tm2.failures()) == ids, "failures found after a restart")
        check(any(i["prog"] == "pgf" for i in tm2.instances()), "instances found after a restart")
        produce(env, reg, "pgf", 1)
        got = tm2.wait_failures(len(ids) + 1)
        check(max(f["id"] for f in got) > max(ids), "ids go on: %r", [f["id"] for f in got])
        tm2.stop()

        # bad targets
        tmb = ct.binary("telemonitor")
        r = subprocess.run([tmb, "-state", env.path("x.state"), "-store", "/tmp/db.sqlite"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(r.returncode == 2 and b"-store" in r.stderr and b"Try" in r.stderr,
              "-store PATH: %d %r", r.returncode, r.stderr)
        with open(env.path("bad.rc"), "w") as f:
            f.write('(defaults (store "/var/lib/cmon.db"))\n' + rc)
        r = subprocess.run([tmb, "-rc", env.path("bad.rc"), "-state", env.path("z.state"),
                            "-check"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(r.returncode == 2 and b"bad.rc:1: error: store:" in r.stderr and
              b"postgresql://" in r.stderr, "(store PATH) in telemonrc: %d %r", r.returncode,
              r.stderr)
        r = subprocess.run([tmb, "-state", env.path("x.state"), "-node", ""],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(r.returncode == 2 and b"-node" in r.stderr, "-node '': %d %r", r.returncode,
              r.stderr)
        dead = "postgresql://cmon:s3cret@127.0.0.1:%d/tm" % ct.free_port()
        r = subprocess.run([tmb, "-rc", tm.rc, "-state", env.path("y.state"), "-regmachine",
                            reg.addr(), "-store", dead], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        err = r.stderr.decode()
        check(r.returncode == 1 and "cmon:***@127.0.0.1" in err and "s3cret" not in err,
              "unreachable server: %d %r", r.returncode, err)


if __name__ == "__main__":
    ct.run_test(main)
