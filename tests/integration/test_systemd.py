"""telemonreg under systemd: readiness (READY=1, STATUS=) and watchdog
pings (WATCHDOG=1 when WATCHDOG_USEC is set) on $NOTIFY_SOCKET, and
socket activation (LISTEN_FDS/LISTEN_PID): it serves on the socket it was
given instead of opening its own. Done without systemd: the test plays
its part."""
import os
import socket
import time

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("systemd") as env:
        notify_path = env.path("notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(10)

        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(16)
        port = lsock.getsockname()[1]

        def give_fd3():
            os.dup2(lsock.fileno(), 3)

        cmd = 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" -debug'
        reg = env.spawn("telemonreg", ["/bin/sh", "-c", cmd, ct.binary("telemonreg")],
                        env={"NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": "300000"},
                        pass_fds=(3,), preexec_fn=give_fd3)
        lsock.close()
        msgs = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum("WATCHDOG=1" in m for m in msgs) < 3:
            msgs.append(notify.recv(4096).decode())
        check(any("READY=1" in m for m in msgs), "no READY=1 among %r", msgs)
        check(any("STATUS=" in m for m in msgs), "no STATUS among %r", msgs)
        check(sum("WATCHDOG=1" in m for m in msgs) >= 3, "watchdog pings: %r", msgs)

        # It serves on the inherited socket.
        reg.port = port
        w = env.watch("-prog", "x", reg=reg)
        w.expect("ack")
        check("socket(s) from systemd" in reg.stderr(), "log: %s", reg.stderr())
        reg.signal(15)
        check(reg.wait(10) == 0, "SIGTERM should be a clean exit: %s", reg.stderr())
        notify.close()


ct.run_test(main)
