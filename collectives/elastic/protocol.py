"""The control socket's wire format, shared by the driver and the ranks.

A message is one JSON line (an object with ``op``), followed by ``nbytes`` raw bytes when it
carries a payload (a committed state). Every request of a rank gets exactly one reply message.

Rank -> driver ``op``s: ``register`` (rank, size, host, pid, init_epoch_ns), ``fetch`` (the last
committed state), ``commit`` (payload = the state; step, epoch_ns; the reply says whether hosts
were added), ``hosts`` (were hosts added?), ``restored`` (epoch_ns), ``first_step`` (epoch_ns; the
reply is this generation's reset record), ``goodbye`` (reason: ``done`` | ``hosts_updated`` |
``abort``; detail). A connection that closes without a goodbye is a rank that died.
"""
from __future__ import annotations

import json
import socket
from typing import Any, BinaryIO

ENV_DRIVER = "RINGSCOPE_ELASTIC_DRIVER"          # host:port of the driver's control socket
ENV_GENERATION = "RINGSCOPE_ELASTIC_GENERATION"  # this world's generation (0, 1, ...)
ENV_STEP_BASE = "RINGSCOPE_ELASTIC_STEP_BASE"    # the tracer step the first step after a restore gets

MAX_LINE = 1 << 20


class ProtocolError(ConnectionError):
    """The peer closed the connection or sent something that is not a message."""


def send(sock: socket.socket, msg: dict[str, Any], payload: bytes = b"") -> None:
    head = dict(msg, nbytes=len(payload))
    sock.sendall(json.dumps(head, separators=(",", ":")).encode() + b"\n" + payload)


def recv(stream: BinaryIO) -> tuple[dict[str, Any], bytes]:
    """The next message and its payload from a socket's ``makefile("rb")``."""
    line = stream.readline(MAX_LINE)
    if not line:
        raise ProtocolError("connection closed")
    if not line.endswith(b"\n"):
        raise ProtocolError("message line too long or cut short")
    try:
        msg = json.loads(line)
    except ValueError:
        raise ProtocolError(f"not a message: {line[:80]!r}") from None
    if not isinstance(msg, dict) or "op" not in msg:
        raise ProtocolError(f"not a message: {line[:80]!r}")
    n = int(msg.pop("nbytes", 0))
    payload = stream.read(n) if n else b""
    if len(payload) != n:
        raise ProtocolError("connection closed inside a payload")
    return msg, payload


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{ENV_DRIVER}={text!r}: expected host:port")
    return host, int(port)
