"""The TCPStore that torch.distributed process groups rendezvous through.

Rank 0 opens the store on a free port (port 0, then reads the real one) and the address travels to
every rank through a ringscope broadcast (over MPI), so no MASTER_ADDR/MASTER_PORT is needed.
"""
from __future__ import annotations

import datetime
import os
import socket

import numpy as np
import torch.distributed as dist

from collectives import api

_STORE = None
_ADDR = None


def local_address(all_local: bool) -> str:
    """This host's address for peers: loopback on one host, else the outward-facing interface
    (``RINGSCOPE_RENDEZVOUS_ADDR`` overrides)."""
    forced = os.environ.get("RINGSCOPE_RENDEZVOUS_ADDR")
    if forced:
        return forced
    if all_local:
        return "127.0.0.1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))     # no packet is sent; picks the routing interface
        return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())
    finally:
        s.close()


def timeout() -> datetime.timedelta:
    return datetime.timedelta(seconds=float(os.environ.get("RINGSCOPE_RENDEZVOUS_TIMEOUT", "300")))


def _share_address(text: str | None) -> str:
    """Rank 0's ``host:port`` to every rank, through a numpy broadcast on the ring/mpi backend
    (gloo itself cannot carry it: its groups need this very address)."""
    buf = np.zeros(256, dtype=np.uint8)
    if text is not None:
        raw = text.encode()
        buf[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    out = api.broadcast(buf, 0, name="ringscope.rendezvous")
    return bytes(out).rstrip(b"\0").decode()


def setup(rank: int, size: int, all_local: bool) -> None:
    """Create the store on rank 0 and connect every rank to it (collective: every rank calls it)."""
    global _STORE, _ADDR
    _ADDR = local_address(all_local)
    store, text = None, None
    if rank == 0:
        store = dist.TCPStore(_ADDR, 0, size, True, timeout(), wait_for_workers=False)
        text = f"{_ADDR}:{int(store.port)}"
    host, port = _share_address(text).rsplit(":", 1)
    port = int(port)
    if rank != 0:
        store = dist.TCPStore(host, port, size, False, timeout())
    _STORE = store


def store():
    """The connected store (``setup`` must have run at ``init``)."""
    if _STORE is None:
        raise RuntimeError("torch.distributed rendezvous not set up; call collectives.torch.init()")
    return _STORE


def address() -> str:
    return _ADDR or "127.0.0.1"


def reset() -> None:
    global _STORE, _ADDR
    _STORE, _ADDR = None, None
