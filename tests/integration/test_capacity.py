"""Past capacity, nothing is silent: a telemonitor that may monitor 3
instances at once (-max-sessions 3) and 10 programs starting together,
each writing for a few seconds, through a class with a tool and a
checker. The 7 it cannot take wait, said in their status ("waiting"),
and start as sessions free up (what went by meanwhile is a counted gap);
one that ends before its turn has its whole log counted as lost. Every
stream is checked as in the burst test: records + lost + skipped +
unchecked = written, record by record and failure by failure."""
import cmontest as ct
from cmontest import check
import test_burst


def main():
    rows, log = test_burst.burst("capacity", streams=10, extra=["-max-sessions", "3"],
                                 writer=["--pace", "0.04"])
    never = [i for i in rows if i["records"] == 0]
    late = log.count("a session is free: monitoring it")
    print("7 waited: %d never monitored (their logs counted as lost), %d started late" %
          (len(never), late))
    check(log.count("it waits for one to end") == 7, "7 of 10 waited: %s", log[-3000:])
    check(len(rows) - len(never) >= 3 and len(never) <= 7,
          "3 monitored at once, the others later or not at all: %r",
          [(i["prog"], i["records"], i["lost"], i["status"]) for i in rows])
    check(all(i["lost"] == test_burst.COUNT for i in never),
          "a log never monitored is counted lost, whole: %r", never)


ct.run_test(main)
