#!/usr/bin/env python3
"""floors.py OBJECT... - the telemonitor's one layering rule: calls only go down.

Every .c file of daemons/telemonitor/ stands on a floor (FLOORS below, the
list docs/HACKING.md explains). A file may call functions defined on its
own floor or below, never above: news goes up only through callback
structs the owner fills in (struct reg_events, struct session_events,
struct failure_subscriber), and data such as the HTTP API's address is
given down in struct tmon. This reads the object files with nm(1): a
symbol an object needs (U) that another object defines (T) is a call (or a
use of a variable) from the one file to the other.

Fails, naming each, on a call up a floor and on a file that has no floor
(a new file gets one here before it builds into the daemon). The
arguments are object files (ctest passes the targets' objects) or
directories searched for *.o. The environment variable NM names nm."""

import os
import subprocess
import sys

# Lowest first. Read this with docs/HACKING.md ("Floors").
FLOORS = [
    # F0 base: pure logic and plumbing that names no telemonitor part
    ("base", "json compare backlog ledger logscan typescript window wtext clock text html "
             "report sketch tool"),
    # F1 configuration and the database connection
    ("config and database", "rcfile setup db db_sqlite db_pg"),
    # F2 the store (and the classes, kept in it)
    ("store", "store_sql store store_read store_fleet classes"),
    # F3 delivery: mail, Alertmanager, silences
    ("delivery", "digest outbox mail notify alerts amsilences hygiene"),
    # F4 a failure: silences, store, counters, then its subscribers
    ("failures", "failures"),
    # F5 monitoring one instance
    ("session", "session checker"),
    # F6 the instances and the registry links
    ("instances", "instances reglink"),
    # F7 queries and changes asked for (telemonctl, the API)
    ("queries", "commands stats versions metrics reload"),
    # F8 front ends
    ("front ends", "control http dashboard"),
    # F9 wiring
    ("main", "main"),
]

FLOOR = {}
for n, (_, names) in enumerate(FLOORS):
    for name in names.split():
        FLOOR[name] = n


def source_name(obj):
    """telemonitor.dir/session.c.o -> session."""
    base = os.path.basename(obj)
    for suffix in (".c.o", ".o"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def objects(args):
    found = []
    for a in args:
        if os.path.isdir(a):
            for root, _, files in os.walk(a):
                found += [os.path.join(root, f) for f in files if f.endswith(".o")]
        else:
            found.append(a)
    return sorted(found)


def symbols(nm, obj):
    """(defined, needed) symbol sets of one object."""
    out = subprocess.run([nm, obj], capture_output=True, text=True, check=True).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            needed.add(parts[1])
    return defined, needed


def main(argv):
    nm = os.environ.get("NM", "nm")
    objs = objects(argv[1:])
    if not objs:
        print("floors: no object files given (build the telemonitor first)", file=sys.stderr)
        return 2
    errors = []
    owner, needs = {}, {}
    for o in objs:
        name = source_name(o)
        if name not in FLOOR:
            errors.append(f"{name}.c has no floor: give it one in {argv[0]} "
                          "(docs/HACKING.md, \"Floors\")")
            continue
        defined, needed = symbols(nm, o)
        for sym in defined:
            owner[sym] = name
        needs[name] = needed
    for name in sorted(needs):
        for sym in sorted(needs[name]):
            callee = owner.get(sym)
            if callee is None or callee == name or FLOOR[callee] <= FLOOR[name]:
                continue
            errors.append(f"{name}.c (F{FLOOR[name]} {FLOORS[FLOOR[name]][0]}) calls up: "
                          f"{sym} of {callee}.c (F{FLOOR[callee]} {FLOORS[FLOOR[callee]][0]}); "
                          "pass a callback struct or the data down instead")
    for e in errors:
        print("floors: " + e, file=sys.stderr)
    if errors:
        return 1
    print(f"floors: {len(needs)} files, every call goes down or stays on its floor")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
