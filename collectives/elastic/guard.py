"""One rank's guard: mpiexec starts this, it starts the rank (``guard.py COMMAND...``).

When the rank dies the guard tells the driver how (``killed by signal 9``) and stays alive until the
driver stops the world: mpiexec must not see a process of the world end, or it may tear the whole
world down before the driver has told the dead rank from the survivors. The rank gets SIGTERM when
its guard dies (mpiexec killing the guards must not leave ranks behind), and the signals the guard
gets are passed on to it. Run as a script, not ``-m``: importing the ``collectives`` package would
load numpy into a process that needs none of it.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402  (this directory's protocol.py, without the package)

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def describe(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "?"
        return f"killed by signal {-status} ({name})"
    return f"exited with status {status}"


def report(rank: int, pid: int, status: int) -> bool:
    """Tell the driver; True when it wants this guard to stay until the world is stopped."""
    address = os.environ.get(protocol.ENV_DRIVER)
    if not address:
        return False
    try:
        with socket.create_connection(protocol.parse_address(address), timeout=10) as sock:
            protocol.send(sock, {"op": "exit", "rank": rank, "pid": pid, "status": status,
                                 "how": describe(status),
                                 "generation": int(os.environ.get(protocol.ENV_GENERATION, "0"))})
            reply, _ = protocol.recv(sock.makefile("rb"))
            return bool(reply.get("wait"))
    except (OSError, protocol.ProtocolError, ValueError):
        return False


def main(argv: list[str]) -> int:
    child = subprocess.Popen(argv, close_fds=False, preexec_fn=_die_with_parent)  # keeps PMI's fd

    def forward(signum: int, frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)
        else:
            os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    # mpiexec (-disable-auto-cleanup) tells the other processes of a world that one ended with
    # SIGUSR1, whose default is to die; a rank's end is the driver's business
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    status = child.wait()
    if status != 0 and report(int(os.environ.get("PMI_RANK", "-1")), child.pid, status):
        while True:
            signal.pause()   # until the driver's SIGTERM
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
