"""Clock offset of this rank against rank 0 by MPI ping-pong (minimum round trip wins).

offset = this rank's wall clock minus rank 0's; uncertainty = half the minimum round trip.
Collective over the communicator; runs on the calling thread with yielding waits.
"""
from __future__ import annotations

import numpy as np

from collectives import mpi_wait
from tracer import clock

ROUNDS = 12
TAG = 31


def _spin_wait(req):
    # ping-pong wants low latency: spin on Test longer than the general wait, then yield
    for _ in range(2000):
        if req.Test():
            return
    mpi_wait.wait(req)


def measure(comm) -> tuple[int, int]:
    """(offset_ns, uncertainty_ns) of this rank; rank 0 gets (0, 0)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    mpi_wait.wait(comm.Ibarrier())
    buf = np.zeros(1, dtype=np.int64)
    result = np.zeros(2, dtype=np.int64)
    if rank == 0:
        for peer in range(1, size):
            best = None
            for _ in range(ROUNDS):
                t0 = clock.wall_ns()
                _spin_wait(comm.Isend(buf, peer, TAG))
                _spin_wait(comm.Irecv(buf, peer, TAG))
                t1 = clock.wall_ns()
                rtt = t1 - t0
                if best is None or rtt < best[0]:
                    best = (rtt, int(buf[0]) - (t0 + t1) // 2)
            result[:] = (best[1], best[0] // 2)
            _spin_wait(comm.Isend(result, peer, TAG))
        return 0, 0
    for _ in range(ROUNDS):
        _spin_wait(comm.Irecv(buf, 0, TAG))
        buf[0] = clock.wall_ns()
        _spin_wait(comm.Isend(buf, 0, TAG))
    mpi_wait.wait(comm.Irecv(result, 0, TAG))
    return int(result[0]), int(result[1])
