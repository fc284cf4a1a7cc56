"""A fleet of telemonitors on one real PostgreSQL server (Debian's
postgresql-15, started by the test; skipped, never passed, where it cannot
start): instance ownership on the server's guarantees (docs/man/telemonitor.8,
"Several telemonitors on one store").

Programs write sequence-numbered records at about 150 a second through a
class with a tool (`cat`, one output file per tool run) and a checker
failing on every 100th record. Each scenario checks every stream: the
records in the tools' files, the loss the telemonitors report, the
failures stored (each once), and who held each instance (the `leases`
table: its epoch rises with every claim, so epoch 1 means one node held
it for its whole life).

  start      3 telemonitors started at the same moment from one telemonrc
             all run (no duplicate key, the class has one id)
  burst      PROGRAMS (100) programs start together on 3 nodes: each checked by
             exactly one node for its whole life (epoch 1), every record
             and failure exact, no duplicate-key or lock noise in the logs
  kill       kill -9 of the node holding an instance mid-stream: another
             takes it over within lease + 1 s; loss reported is loss that
             happened (never less; more only by what the dead node had
             taken in since its last commit)
  killback   the holder killed, restarted, then the node that took over
             killed: the first takes it back from the row (not from the
             ledgers of its first hold); a pcheck process as checker, whose
             trailing progress makes each takeover count unchecked records
  stop       SIGSTOP of the owner for longer than a lease: another node
             takes over (its Start, with the newer epoch, cuts the stopped
             one off at the snarflog); after SIGCONT the stale owner writes
             nothing for the instance (the fence) and lets it go
  skew       a node whose clock is 10 s ahead (faketime) takes nothing over
  pgrestart  the server killed and restarted: no instance changes hands
  outage     OUTAGE_PROGRAMS (100) programs start together, unpaced, while
             the server is down (kill -9): no node can record them; each
             keeps the announcements and tries again every second, and once
             the server is back every instance is claimed once (epoch 1),
             monitored whole: no record lost, every failure exact (the
             snarflogs hold the logs meanwhile: -hold, -drain)
  join       a third node joins two busy ones and gets its share, handed
             over at a record boundary with nothing lost
  unmonitored  past capacity (max-sessions 1 on two busy nodes), programs
             that end before any node had room for them: each is ended by
             the node that hears of its end first, its whole log counted
             as lost, and nobody claims it afterwards for a stream that
             is gone
"""
import glob
import os
import re
import shutil
import signal
import time

import cmontest as ct
import pgserver
import telemontest as tt
from cmontest import check

_E = os.environ.get
PROGRAMS = int(_E("CMON_FLEET_PROGRAMS", 100))
OUTAGE_PROGRAMS = int(_E("CMON_FLEET_OUTAGE_PROGRAMS", 100))
EVERY = 100
LEASE = 3.0                     # STORE_LEASE_S

SPEC = """perfspec fleet
  event Ev(seq);
  assert "every hundredth": {& e : Ev : e.seq mod %d != 0};
end fleet
""" % EVERY


class Fleet:
    """N telemonitors on one new database, a registry, programs."""

    def __init__(self, env, srv, name, nodes=("n1", "n2", "n3"), wrap=None, extra=()):
        self.env, self.srv, self.name = env, srv, name
        self.extra = list(extra)
        self.db = name
        self.url = srv.createdb(name)
        self.reg = env.registry()
        spec = env.path("fleet.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        tool = "exec cat >> %s/%s.$M_PROG.$$.out" % (env.dir, name)
        self.rc = tt.rc_class("%s-*" % name, spec=spec, tool=tool, block=False)
        self.progs = {}
        self.tms = {}
        self.started = time.monotonic()
        self.start_nodes(nodes, wrap=wrap)

    def start_nodes(self, nodes, wrap=None):
        """Start these nodes at the same moment; wait until each answers."""
        for n in nodes:
            self.tms[n] = tt.Telemonitor(self.env, self.reg, self.rc, name="%s-%s" % (self.name, n),
                                         extra=["-store", self.url, "-node", n] + self.extra,
                                         wait=False,
                                         prefix=(wrap or {}).get(n, ()))
        for n in nodes:
            self.tms[n].wait_ready(timeout=30)

    def sql(self, q):
        return [ln.split("|") for ln in self.srv.sql(self.db, q).strip().splitlines() if ln]

    def program(self, k, count, pace=0.2, batch=30, drain=15, hold=None):
        prog = "%s-%03d" % (self.name, k)
        extra = ["-hold", str(hold)] if hold is not None else []
        snarf = self.env.snarflog(prog, "-drain", str(drain), *extra, reg=self.reg,
                                  wait_port=False,
                                  cmd=ct.logwriter_cmd("--count", str(count), "--batch", str(batch),
                                                       "--pace", str(pace)))
        self.progs[prog] = (count, snarf)
        return prog

    def instance_rows(self):
        """prog -> dict of its instance row and lease."""
        rows = self.sql("SELECT i.prog, i.id, i.state, i.records, i.lost, i.skipped,"
                        " i.unchecked, coalesce(l.epoch, 0), coalesce(l.owner, ''),"
                        " (SELECT count(*) FROM failures f WHERE f.instance_id = i.id),"
                        " (SELECT count(*) FROM failures f WHERE f.instance_id = i.id"
                        "  AND coalesce(f.result, '') <> 'inconclusive'),"
                        " (SELECT coalesce(sum(c.count), 0) FROM failure_counts c"
                        "  WHERE c.instance_id = i.id)"
                        " FROM instances i LEFT JOIN leases l ON l.instance_id = i.id"
                        " WHERE i.prog LIKE '%s-%%'" % self.name)
        out = {}
        for r in rows:
            out[r[0]] = dict(id=int(r[1]), state=r[2], records=int(r[3]), lost=int(r[4]),
                             skipped=int(r[5]), unchecked=int(r[6]), epoch=int(r[7]),
                             owner=r[8], failures=int(r[9]), conclusive=int(r[10]),
                             counted=int(r[11]))
        return out

    def wait_ended(self, timeout=120):
        for prog, (count, snarf) in self.progs.items():
            check(snarf.wait(timeout) == 0, "%s: snarflog: %s", prog, snarf.stderr()[-1500:])

        def ended():
            rows = self.instance_rows()
            return rows if len(rows) == len(self.progs) and \
                all(r["state"] in ("ended", "gone") for r in rows.values()) else None
        return ct.wait_for(ended, timeout, "every instance of %s to end" % self.name,
                           interval=0.5)

    def tool_records(self, prog):
        """The records of every tool run of `prog` (a set of sequence
        numbers), each file checked: increasing, gaps where they belong."""
        seqs = set()
        for path in glob.glob(self.env.path("%s.%s.*.out" % (self.name, prog))):
            with open(path, "rb") as f:
                last = None
                for line in f.read().decode().splitlines():
                    if line.startswith("#cmon-gap "):
                        if last is not None:
                            last += int(line.split()[1])
                        continue
                    if not line or line.startswith("#"):
                        continue
                    q = int(line.split()[3])
                    check(last is None or q >= last + 1 or q > last,
                          "%s: %s: record %d after %s", prog, path, q, last)
                    seqs.add(q)
                    last = q
        return seqs

    def failure_seqs(self, iid):
        rows = self.sql("SELECT metrics FROM failures WHERE instance_id = %d" % iid)
        return [int(re.search(r'"seq":\s*(\d+)', r[0]).group(1)) for r in rows]

    def check_streams(self, rows, slack=0):
        """Every stream: records + lost + skipped + unchecked = written;
        loss reported is loss that happened (the records no tool got), but
        for `slack` records an owner killed had taken in since its last
        commit; failures each once, all of the records checked."""
        worst = 0
        for prog, (count, _) in self.progs.items():
            r = rows[prog]
            acct = r["records"] + r["lost"] + r["skipped"] + r["unchecked"]
            check(acct == count, "%s: records+lost+skipped+unchecked = %d, not %d: %r", prog,
                  acct, count, r)
            got = self.tool_records(prog)
            missing = count - len(got)
            check(r["lost"] >= missing, "%s: %d records missing, %d reported lost", prog, missing,
                  r["lost"])
            check(r["lost"] - missing <= slack, "%s: %d reported lost, %d missing (slack %d)",
                  prog, r["lost"], missing, slack)
            worst = max(worst, r["lost"] - missing)
            seqs = self.failure_seqs(r["id"])
            check(len(seqs) == len(set(seqs)), "%s: a failure stored twice", prog)
            check(all(q % EVERY == 0 for q in seqs), "%s: a failure that is none", prog)
            check(len(seqs) == r["failures"], "%s: rows vs count", prog)
            # the count every listing and /metrics read (failure_counts, kept
            # by a trigger with each row: schema 17) agrees with the rows,
            # whoever wrote them, after a kill -9, a SIGSTOP or a burst
            check(r["counted"] == r["conclusive"], "%s: failure_counts says %d, %d rows", prog,
                  r["counted"], r["conclusive"])
            want = {q for q in got if q % EVERY == 0}
            if not r["unchecked"] and not r["lost"]:
                check(set(seqs) == want, "%s: failures %d, the checker was given %d", prog,
                      len(seqs), len(want))
            else:
                # a failure missing lies among the records counted unchecked
                # or lost (those a dead holder took in and reported on to
                # itself alone), which hold one every EVERY records
                short = len(want - set(seqs))
                check(short <= (r["unchecked"] + r["lost"]) // EVERY + 1,
                      "%s: %d failures missing, but only %d records unchecked and %d lost", prog,
                      short, r["unchecked"], r["lost"])
        return worst

    def check_whole(self, rows):
        """Every log monitored whole: nothing lost, skipped or unchecked
        (check_streams alone accepts loss that is counted)."""
        short = [(p, rows[p]["records"], rows[p]["lost"], rows[p]["skipped"], rows[p]["unchecked"],
                  rows[p]["state"]) for p, (count, _) in self.progs.items()
                 if rows[p]["records"] != count]
        check(not short, "%d logs not monitored whole (prog, records, lost, skipped, unchecked,"
              " state): %r", len(short), short[:20])

    def logs(self):
        return "".join(tm.stderr() for tm in self.tms.values())

    def no_noise(self):
        log = self.logs()
        for bad in ("duplicate key", "deadlock", "cannot be stored and is dropped",
                    "violates"):
            check(bad not in log, "%r in the logs: %s", bad,
                  "\n".join(l for l in log.splitlines() if bad in l)[:2000])

    def stop(self):
        for tm in self.tms.values():
            if tm.proc.alive():
                tm.stop()


def holder(fl, prog):
    r = fl.instance_rows().get(prog)
    return r and r["owner"] in fl.tms and r["records"] > 0 and r


def scenario_start_and_burst(env, srv):
    fl = Fleet(env, srv, "burst")
    for tm in fl.tms.values():
        st = tm.json("status")
        check(st["store"]["engine"] == "postgresql", "%r", st)
    classes = fl.sql("SELECT id FROM classes")
    check(len(classes) == 1, "one class, one id: %r", classes)
    t0 = time.monotonic()
    for k in range(PROGRAMS):
        # (-hold: the nodes started a moment ago take nothing new until
        # they have counted the fleet twice, so the burst is shared out by
        # their lease scans; under the sanitizers that outlasts snarflog's
        # default hold of 5 s for these 4 s programs, and a log whose
        # snarflog gave up is counted as lost, not monitored whole)
        fl.program(k, 600, hold=30)
    rows = fl.wait_ended()
    moved = [p for p, r in rows.items() if r["epoch"] != 1]
    check(not moved, "instances moved between live nodes: %r", [(p, rows[p]) for p in moved])
    fl.check_whole(rows)
    fl.check_streams(rows)
    fl.no_noise()
    per = {}
    for r in rows.values():
        per[r["owner"] or "?"] = per.get(r["owner"] or "?", 0) + 1
    print("burst: %d programs on 3 nodes in %.1f s, held by %r, none moved" %
          (PROGRAMS, time.monotonic() - t0, per))
    fl.stop()


def scenario_kill(env, srv):
    fl = Fleet(env, srv, "kill", nodes=("n1", "n2"))
    prog = fl.program(0, 1500, pace=0.2, batch=30)
    r = ct.wait_for(lambda: (lambda x: x if x and x["records"] > 300 else None)(holder(fl, prog)),
                    30, "an owner")
    owner = r["owner"]
    killed = time.monotonic()
    fl.tms[owner].proc.kill()
    fl.tms[owner].proc.wait()
    other = [n for n in fl.tms if n != owner][0]
    ct.wait_for(lambda: fl.instance_rows()[prog]["epoch"] == 2, 20, "a new epoch")
    took = time.monotonic() - killed
    check(took <= LEASE + 1 + 1.0, "taken over after %.1f s (lease %.0f s)", took, LEASE)
    rows = fl.wait_ended()
    check(rows[prog]["owner"] == other, "the survivor holds it: %r", rows[prog])
    # the checker runs in the telemonitor: before each save of the row it
    # hands over its reports, so the row's `checked` is its `records` and
    # the takeover has nothing to count as unchecked
    check(rows[prog]["unchecked"] == 0, "unchecked after the takeover: %r", rows[prog])
    over = fl.check_streams(rows, slack=60)
    print("kill: taken over after %.1f s; %d reported lost beyond what was missing, %d unchecked"
          % (took, over, rows[prog]["unchecked"]))
    fl.no_noise()
    fl.tms = {other: fl.tms[other]}
    fl.stop()


def scenario_killback(env, srv):
    """kill -9 of the holder, its restart, then kill -9 of the node that
    took over: the first node takes the instance back (epoch 3) and starts
    from the row, not from the ledgers it had kept of its first hold. The
    checker is a pcheck process (-checker process), whose progress trails
    what it was given: each takeover counts the records the row has past
    its `checked` as unchecked, and the failures missing lie among them."""
    fl = Fleet(env, srv, "back", nodes=("n1", "n2"), extra=["-checker", "process"])
    prog = fl.program(0, 3000, pace=0.2, batch=30)
    r = ct.wait_for(lambda: (lambda x: x if x and x["records"] > 300 else None)(holder(fl, prog)),
                    30, "an owner")
    first = r["owner"]
    other = [n for n in fl.tms if n != first][0]
    fl.tms[first].proc.kill()
    fl.tms[first].proc.wait()
    ct.wait_for(lambda: fl.instance_rows()[prog]["epoch"] == 2, 20, "a new epoch")
    fl.tms[first].start()               # the same state directory and node name
    at = fl.instance_rows()[prog]["records"]
    ct.wait_for(lambda: (lambda x: x["owner"] == other and x["records"] > at + 300)(
        fl.instance_rows()[prog]), 30, "the second holder to go on")
    fl.tms[other].proc.kill()
    fl.tms[other].proc.wait()
    ct.wait_for(lambda: fl.instance_rows()[prog]["epoch"] == 3, 20, "a third epoch")
    rows = fl.wait_ended()
    check(rows[prog]["owner"] == first, "the first node holds it again: %r", rows[prog])
    over = fl.check_streams(rows, slack=120)
    print("killback: %s, %s, %s again; %d reported lost beyond what was missing, %d unchecked"
          % (first, other, first, over, rows[prog]["unchecked"]))
    fl.no_noise()
    fl.tms = {first: fl.tms[first]}
    fl.stop()


def scenario_stop(env, srv, pause):
    fl = Fleet(env, srv, "stop", nodes=("n1", "n2"))
    prog = fl.program(0, int(150 * (pause + 8)), pace=0.2, batch=30)
    r = ct.wait_for(lambda: (lambda x: x if x and x["records"] > 300 else None)(holder(fl, prog)),
                    30, "an owner")
    owner = r["owner"]
    other = [n for n in fl.tms if n != owner][0]
    fl.tms[owner].proc.signal(signal.SIGSTOP)
    stopped = time.monotonic()
    ct.wait_for(lambda: fl.instance_rows()[prog]["epoch"] == 2, 20, "a new epoch")
    took = time.monotonic() - stopped
    # the new holder streams at once: the snarflog took the stream from
    # the stopped one (a newer epoch)
    ct.wait_for(lambda: "streaming %s" % prog in fl.tms[other].stderr(), 10,
                "the new holder to stream")
    taken = fl.instance_rows()[prog]["records"]
    before = int(fl.sql("SELECT count(*) FROM failures")[0][0])
    time.sleep(max(0.0, pause - (time.monotonic() - stopped)))
    cont = time.time()
    fl.tms[owner].proc.signal(signal.SIGCONT)
    ct.wait_for(lambda: "letting go" in fl.tms[owner].stderr() or
                "another telemonitor took the stream" in fl.tms[owner].stderr(), 20,
                "the stale owner to let go")
    rows = fl.wait_ended()
    check(rows[prog]["owner"] == other and rows[prog]["epoch"] == 2, "%r", rows[prog])
    # the fence: after the new epoch, nothing from the stale owner's id
    # block (ids are handed out per node) went in
    stale = fl.sql("SELECT count(*) FROM failures WHERE time >= %f AND id / %d IN"
                   " (SELECT DISTINCT id / %d FROM failures WHERE time < %f AND instance_id = %d"
                   "  AND id NOT IN (SELECT id FROM failures WHERE time >= %f))" %
                   (cont - 1, 1 << 20, 1 << 20, cont - pause, rows[prog]["id"], cont - pause))
    check(int(stale[0][0]) == 0, "the stale owner wrote %s failures after it lost the instance",
          stale[0][0])
    check(rows[prog]["unchecked"] == 0, "unchecked after the takeover: %r", rows[prog])
    fl.check_streams(rows, slack=60)
    print("stop %.0f s: taken over after %.1f s (the new holder had %d records by then);"
          " %d failures before the continue, no write from the stale owner after;"
          " %d unchecked" % (pause, took, taken, before, rows[prog]["unchecked"]))
    fl.no_noise()
    fl.stop()


def scenario_skew(env, srv):
    lib = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if not lib:
        ct.skip("libfaketime is not installed (scripts/deps.sh installs faketime)")
    with open(ct.binary("telemonitor"), "rb") as f:
        if b"AddressSanitizer" in f.read():
            # libfaketime and the sanitizers' runtime both take over the
            # clock calls; together the service does not start
            print("skew: not under the sanitizers (libfaketime and ASan do not mix); "
                  "the plain build runs it")
            return
    # (libfaketime itself, not the faketime wrapper, so that the service
    # gets the signals the test sends)
    fl = Fleet(env, srv, "skew", wrap={"n3": ["env", "LD_PRELOAD=" + lib[0], "FAKETIME=+10s"]})
    for k in range(15):
        fl.program(k, 900)
    rows = fl.wait_ended()
    moved = [p for p, r in rows.items() if r["epoch"] != 1]
    check(not moved, "a node 10 s ahead took instances over: %r", moved)
    fl.check_whole(rows)
    fl.check_streams(rows)
    print("skew: a node 10 s ahead; %d instances, none moved" % len(rows))
    fl.stop()


def scenario_pgrestart(env, srv):
    fl = Fleet(env, srv, "pgr", nodes=("n1", "n2"))
    # (the test's server acknowledges commits before writing them for
    # speed; a commit it then loses to kill -9 is no fault of ours)
    srv.sql("postgres", "ALTER DATABASE pgr SET synchronous_commit = on")
    for tm in fl.tms.values():
        tm.proc.kill()
        tm.proc.wait()
        tm.start()
    for k in range(6):
        fl.program(k, 1500)
    ct.wait_for(lambda: len([r for r in fl.instance_rows().values() if r["records"] > 150]) == 6,
                30, "every instance monitored")
    srv.kill()
    time.sleep(LEASE + 1)
    srv.restart()
    rows = fl.wait_ended()
    moved = [p for p, r in rows.items() if r["epoch"] != 1]
    check(not moved, "instances changed hands over a server restart: %r", moved)
    fl.check_whole(rows)
    fl.check_streams(rows)
    print("pgrestart: server down %.0f s; none moved" % (LEASE + 1))
    fl.stop()


def scenario_outage(env, srv, programs=OUTAGE_PROGRAMS, count=3000):
    fl = Fleet(env, srv, "out")
    srv.sql("postgres", "ALTER DATABASE out SET synchronous_commit = on")
    time.sleep(2.5)                     # (every node has counted the fleet twice)
    srv.kill()
    for tm in fl.tms.values():
        ct.wait_for(lambda: tm.json("status")["store"]["state"] != "ok", 20,
                    "every node to notice the store is gone")
    down = time.monotonic()
    for k in range(programs):
        # (-hold: a log that ends before its auto subscriber connects waits
        # for it that long; these end within a second, the server is down
        # for longer than the default 5 s)
        fl.program(k, count, pace=0, batch=100, drain=120, hold=120)

    def waiting(tm):
        return len(re.findall(r"out-\d+.*cannot be recorded in the store", tm.stderr()))
    ct.wait_for(lambda: all(waiting(tm) == programs for tm in fl.tms.values()), 60,
                "every node to keep every new instance for the store")
    srv.restart()
    back = time.monotonic()
    rows = fl.wait_ended(timeout=180)
    moved = [(p, r["epoch"], r["owner"]) for p, r in rows.items() if r["epoch"] != 1]
    check(not moved, "instances claimed more than once: %r", moved[:20])
    # every log was held for the fleet: none of it is lost
    fl.check_whole(rows)
    fl.check_streams(rows)
    fl.no_noise()
    per = {}
    for r in rows.values():
        per[r["owner"] or "?"] = per.get(r["owner"] or "?", 0) + 1
    print("outage: %d programs x %d records started while the server was down (%.1f s); after it"
          " came back every one claimed once, held by %r; all ended %.1f s later, exact" %
          (programs, count, back - down, per, time.monotonic() - back))
    fl.stop()


def scenario_join(env, srv):
    fl = Fleet(env, srv, "join", nodes=("n1", "n2"))
    n = 18
    for k in range(n):
        fl.program(k, 150 * 25)
    ct.wait_for(lambda: len([r for r in fl.instance_rows().values() if r["records"] > 0]) == n,
                30, "every instance monitored")
    time.sleep(max(0.0, 6 - (time.monotonic() - fl.started)))   # (not started with them)
    fl.start_nodes(("n3",))
    share = n // 3

    def balanced():
        rows = fl.instance_rows()
        per = {}
        for r in rows.values():
            if r["state"] not in ("ended", "gone"):
                per[r["owner"]] = per.get(r["owner"], 0) + 1
        return per if abs(per.get("n3", 0) - share) <= max(1, share // 10) else None
    joined = time.monotonic()
    per = ct.wait_for(balanced, 30, "the new node to get its share")
    joined = time.monotonic() - joined
    rows = fl.wait_ended()
    handed = [p for p, r in rows.items() if r["epoch"] > 1]
    # what the old nodes let go went to the new one, not to each other
    # (two of them handing over at once used to take each other's)
    check(all(rows[p]["owner"] == "n3" for p in handed), "handed over between the old nodes: %r",
          [(p, rows[p]["owner"], rows[p]["epoch"]) for p in handed])
    check(all(rows[p]["lost"] == 0 for p in handed), "loss on a hand-over: %r",
          [(p, rows[p]) for p in handed if rows[p]["lost"]])
    fl.check_whole(rows)
    fl.check_streams(rows)
    fl.no_noise()
    # whole-log verdicts: of a handed-over instance, one set per holder,
    # each marked partial with the records it covers, together the log
    for p in handed:
        v = fl.sql("SELECT from_rec, to_rec, partial FROM verdicts WHERE instance_id = %d"
                   " AND assert IS NOT NULL ORDER BY from_rec" % rows[p]["id"])
        check(v and all(r[2] == "1" for r in v), "%s: verdicts not marked partial: %r", p, v)
        check(int(v[0][0]) == 1 and int(v[-1][1]) == fl.progs[p][0],
              "%s: the verdicts cover records %s-%s of %d", p, v[0][0], v[-1][1], fl.progs[p][0])
    for p, r in rows.items():
        if p not in handed:
            v = fl.sql("SELECT partial FROM verdicts WHERE instance_id = %d" % r["id"])
            check(all(x[0] == "0" for x in v), "%s: a whole-log verdict marked partial", p)
    print("join: the new node got %d of %d (share %d) in %.1f s, %d handed over, nothing lost" %
          (per.get("n3", 0), n, share, joined, len(handed)))
    fl.stop()


def scenario_unmonitored(env, srv):
    fl = Fleet(env, srv, "full", nodes=("n1", "n2"), extra=["-max-sessions", "1"])
    began = time.monotonic()
    busy = [fl.program(k, 1500, pace=0.2, batch=30) for k in range(2)]
    held = ct.wait_for(lambda: (lambda r: r if all(holder(fl, p) for p in busy) and
                                len({r[p]["owner"] for p in busy}) == 2 else None)(
                                    fl.instance_rows()), 30, "one busy program on each node")
    t0 = time.monotonic() - began
    for k in range(2, 6):
        # -hold 0: at the end of its log the snarflog does not wait for a
        # subscriber to connect (it says the log's length as it leaves)
        prog = "%s-%03d" % (fl.name, k)
        fl.progs[prog] = (50, env.snarflog(prog, "-hold", "0", "-drain", "2", reg=fl.reg,
                                           wait_port=False, cmd=ct.logwriter_cmd(
                                               "--count", "50", "--batch", "50", "--pace", "0")))

    def short_ended():
        rows = fl.instance_rows()
        short = [rows.get("%s-%03d" % (fl.name, k)) for k in range(2, 6)]
        return rows if all(r and r["state"] == "gone" for r in short) else None
    rows = ct.wait_for(short_ended, 30, "the short programs' instances to end")
    t1 = time.monotonic() - began
    check(all(rows[p]["state"] == "monitoring" for p in busy),
          "the busy ones still held: %r", {p: rows[p] for p in busy})
    rows = fl.wait_ended()
    for k in range(2, 6):
        r = rows["%s-%03d" % (fl.name, k)]
        check(r["records"] == 0 and r["lost"] == 50 and r["skipped"] == 0,
              "an instance nobody had room for: %r", r)
    fl.check_streams(rows)
    log = fl.logs()
    check(log.count("before any telemonitor monitored it: its 50 records counted as "
                    "lost") == 4, "said once each: %s", log[-3000:])
    print("unmonitored: 4 programs ended past capacity, each counted lost once (held %.1f s,"
          " ended %.1f s after the busy ones began); held %r" %
          (t0, t1, {p: held[p]["owner"] for p in busy}))
    fl.no_noise()
    fl.stop()


def scenario_measure(env, srv, programs, seconds):
    """What the fleet costs the server: statements and WAL bytes per
    monitored instance per second, in the steady state (bench/fleet)."""
    fl = Fleet(env, srv, "cost")
    srv.sql("cost", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    for k in range(programs):
        fl.program(k, int(150 * (seconds + 10)))
    ct.wait_for(lambda: len([r for r in fl.instance_rows().values() if r["records"] > 0]) ==
                programs, 60, "every instance monitored")
    time.sleep(2)

    def sample():
        wal = int(fl.sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")[0][0])
        calls = fl.sql("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN"
                       " pg_database d ON d.oid = s.dbid WHERE d.datname = 'cost'"
                       " AND query NOT LIKE '%pg_stat_statements%'"
                       " AND query NOT LIKE '%pg_wal_lsn_diff%'")
        xact = fl.sql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'cost'")
        return wal, int(float(calls[0][0])), int(xact[0][0]), time.monotonic()
    w0, c0, x0, t0 = sample()
    time.sleep(seconds)
    w1, c1, x1, t1 = sample()
    per = programs * (t1 - t0)
    print("cost: %d instances at 150 records/s on 3 nodes, %.0f s: %.1f statements, %.2f"
          " commits, %.0f WAL bytes per instance per second (%.0f statements/s, %.0f KB/s of"
          " WAL in all)" % (programs, t1 - t0, (c1 - c0) / per, (x1 - x0) / per,
                             (w1 - w0) / per, (c1 - c0) / (t1 - t0), (w1 - w0) / (t1 - t0) / 1e3))
    rows = fl.wait_ended(timeout=300)
    fl.check_streams(rows)
    fl.stop()


def main():
    with ct.Env("fleet") as env:
        which = _E("CMON_FLEET_ONLY",
                   "start,kill,killback,stop,skew,pgrestart,outage,join,"
                   "unmonitored").split(",")
        if "measure" in which:
            srv = pgserver.start(env, ["-c", "shared_preload_libraries=pg_stat_statements"])
            scenario_measure(env, srv, PROGRAMS, float(_E("CMON_FLEET_SECONDS", 20)))
            return
        srv = pgserver.start(env)
        began = time.monotonic()
        for name, scenario in (
                ("start", scenario_start_and_burst),
                ("kill", scenario_kill),
                ("killback", scenario_killback),
                ("stop", lambda e, s: scenario_stop(e, s, float(_E("CMON_FLEET_STOP_S", 8)))),
                ("pgrestart", scenario_pgrestart),
                ("outage", scenario_outage),
                ("join", scenario_join),
                ("skew", scenario_skew),
                ("unmonitored", scenario_unmonitored)):
            if name in which:
                # (which one a failure came from, and when, even where the
                # output is shown in part)
                print("-- %s, at %.0f s" % (name, time.monotonic() - began))
                scenario(env, srv)


ct.run_test(main)
