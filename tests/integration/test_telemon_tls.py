"""telemonitor over mutual TLS: with -tls-cert/-tls-key/-tls-ca it speaks TLS
to the registry and to every snarflog's data endpoint, and the failures of
an instance are stored as over plain TCP. With a certificate from another
CA it gets nowhere (and says so), while the monitored program goes on."""
import cmontest as ct
import telemontest as tt
from cmontest import check


def main():
    with ct.Env("telemon_tls") as env:
        certs = ct.make_certs(env.dir)
        node = dict(certs["node"], ca=certs["ca"])
        other = dict(certs["other"], ca=certs["ca"])
        evil = dict(certs["evil"], ca=certs["ca"])
        reg = env.registry(tls=node)
        tm = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC),
                            extra=ct.tls_args(other))
        ct.wait_for(lambda: tm.json("status")["registry_state"] == "connected", 10,
                    "the registry link over TLS")
        s = env.snarflog("fsread", reg=reg, tls=node,
                         cmd=tt.writer_cmd("--reads", 100, "--slow", "10"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        inst = tm.instance(lambda i: i["state"] == "ended", what="the instance over TLS")
        check(inst["records"] == 300 and inst["lost"] == 0, "complete: %r", inst)
        check(len(tm.wait_failures(1)) == 1, "its failure is stored")
        tm.stop()

        bad = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC),
                             name="evil", extra=ct.tls_args(evil))
        ct.wait_for(lambda: "registry unavailable" in bad.stderr(), 10, "the refusal")
        check(bad.json("status")["registry_state"] != "connected", "not connected")
        bad.stop()


ct.run_test(main)
