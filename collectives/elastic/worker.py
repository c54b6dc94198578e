"""A rank's side of the control socket (see :mod:`collectives.elastic.protocol`).

``hvd.init()`` calls :func:`connect` when the driver's address is in the environment: the rank
registers and keeps the connection open for the life of the process, so that its closing tells the
driver at once that the rank died. Rank 0 commits the state through it and fetches it back after a
reset; every rank reports when it has restored and when its first step after the restore ended,
and says goodbye before it exits on purpose.
"""
from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from typing import Any

import tracer
from collectives import fatal
from collectives.elastic import protocol

REPLY_TIMEOUT_S = 120.0   # the driver answers at once; this only bounds a driver that vanished


class Connection:
    """One rank's open connection to the driver."""

    def __init__(self, address: str, generation: int, step_base: int):
        self.generation = generation
        self.step_base = step_base
        self.sock = socket.create_connection(protocol.parse_address(address), timeout=30)
        self.sock.settimeout(REPLY_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.stream = self.sock.makefile("rb")
        self._lock = threading.Lock()
        self.closed = False
        self.reset: dict[str, Any] | None = None   # the register reply: is this world a reset?

    def request(self, msg: dict[str, Any], payload: bytes = b"") -> tuple[dict[str, Any], bytes]:
        with self._lock:
            if self.closed:
                raise protocol.ProtocolError("the control connection is closed")
            protocol.send(self.sock, msg, payload)
            return protocol.recv(self.stream)

    def goodbye(self, reason: str, detail: str = "") -> None:
        """Tell the driver this rank ends on purpose (idempotent); closes the connection."""
        if self.closed:
            return
        try:
            self.sock.settimeout(2.0)
            self.request({"op": "goodbye", "reason": reason, "detail": detail[-2000:]})
        except (OSError, protocol.ProtocolError):
            pass
        finally:
            self.closed = True
            self.sock.close()


_conn: Connection | None = None


def connect(rank: int, size: int) -> Connection | None:
    """Register this rank with the driver named by the environment (None when not elastic)."""
    global _conn
    address = os.environ.get(protocol.ENV_DRIVER)
    if not address or _conn is not None:
        return _conn
    conn = Connection(address, int(os.environ.get(protocol.ENV_GENERATION, "0")),
                      int(os.environ.get(protocol.ENV_STEP_BASE, "0")))
    reply, _ = conn.request({"op": "register", "rank": rank, "size": size,
                             "generation": conn.generation,
                             "host": socket.gethostname(), "pid": os.getpid(),
                             "init_epoch_ns": time.time_ns()})
    if reply.get("op") != "registered":
        raise RuntimeError(f"the elastic driver refused rank {rank}: {reply.get('error')}")
    conn.reset = reply.get("reset")
    _conn = conn
    tracer.get_recorder().set_run_meta(generation=conn.generation)
    fatal.ON_ABORT.append(_on_abort)
    # a rank that ends normally, elastic.run or not, is done (it did not die): before the
    # runtime's own exit handler (atexit runs the last registered first)
    atexit.register(conn.goodbye, "done")
    return conn


def connection() -> Connection | None:
    """This rank's connection to the driver (None outside an elastic job)."""
    return _conn


def _on_abort(detail: str = "") -> None:
    if _conn is not None:
        _conn.goodbye("abort", detail)
