"""Clock offset of this rank against rank 0 by ping-pong (minimum round trip wins).

offset = this rank's wall clock minus rank 0's; uncertainty = half the minimum round trip.
:func:`ping_pong` is the exchange over any transport; :func:`measure` runs it over an MPI
communicator (the torch DDP tracer runs it over the job's process group:
:mod:`collectives.torch.ddp_clock`). Collective; runs on the calling thread.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from collectives import mpi_wait
from tracer import clock

ROUNDS = 12
TAG = 31

Transfer = Callable[[np.ndarray, int], None]   # (int64 buffer, peer rank): blocks until done


def _spin_wait(req: Any) -> None:   # an MPI request
    # ping-pong wants low latency: spin on Test longer than the general wait, then yield
    for _ in range(2000):
        if req.Test():
            return
    mpi_wait.wait(req)


def ping_pong(rank: int, size: int, send: Transfer, recv: Transfer) -> tuple[int, int]:
    """(offset_ns, uncertainty_ns) of this rank; rank 0 gets (0, 0). Every rank calls it."""
    buf = np.zeros(1, dtype=np.int64)
    result = np.zeros(2, dtype=np.int64)
    if rank == 0:
        for peer in range(1, size):
            best: tuple[int, int] | None = None
            for _ in range(ROUNDS):
                t0 = clock.wall_ns()
                send(buf, peer)
                recv(buf, peer)
                t1 = clock.wall_ns()
                rtt = t1 - t0
                if best is None or rtt < best[0]:
                    best = (rtt, int(buf[0]) - (t0 + t1) // 2)
            assert best is not None   # ROUNDS >= 1
            result[:] = (best[1], best[0] // 2)
            send(result, peer)
        return 0, 0
    for _ in range(ROUNDS):
        recv(buf, 0)
        buf[0] = clock.wall_ns()
        send(buf, 0)
    recv(result, 0)
    return int(result[0]), int(result[1])


def measure(comm: Any) -> tuple[int, int]:
    """:func:`ping_pong` over an MPI communicator."""
    mpi_wait.wait(comm.Ibarrier())
    return ping_pong(comm.Get_rank(), comm.Get_size(),
                     lambda buf, peer: _spin_wait(comm.Isend(buf, peer, TAG)),
                     lambda buf, peer: _spin_wait(comm.Irecv(buf, peer, TAG)))
