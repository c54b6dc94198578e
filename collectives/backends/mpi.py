"""``mpi`` backend: MPI's native nonblocking collectives plus a yielding wait.

float16 has no portable MPI reduction type, so float16 reductions run in float32 and round back.
Data movement (allgather, broadcast, alltoall) goes as bytes, so every dtype works.
"""
from __future__ import annotations

import numpy as np

from collectives import mpi_wait
from collectives.backends import hierarchical
from collectives.backends.base import Backend, activity
from collectives.ops import mpi_op
from tracer import vocab as V

# mpi4py.MPI is imported where it is used: importing it starts MPI, which collectives.init does first


def _bytes(a):
    return a.view(np.uint8)


def _displs(counts):
    out, acc = [], 0
    for c in counts:
        out.append(acc)
        acc += c
    return out


def _reducible(buf):
    """(array MPI reduces, whether it is a float32 stand-in for a float16 buffer)."""
    if buf.dtype == np.float16:
        return buf.astype(np.float32), True
    return buf, False


class MpiBackend(Backend):
    name = "mpi"

    def __init__(self, config=None):
        self.config = config
        self._scratch = np.empty(0, dtype=np.uint8)

    def scratch_of(self, numel, dtype):
        """A reused scratch array of ``numel`` elements (valid until the next call)."""
        need = numel * dtype.itemsize
        if self._scratch.nbytes < need:
            self._scratch = np.empty(max(need, 2 * self._scratch.nbytes), dtype=np.uint8)
        return self._scratch[:need].view(dtype)

    takes_src = True
    allreduce_activity = V.MPI_ALLREDUCE

    def allreduce(self, buf, op, comm, src=None) -> None:
        """Reduce into ``buf``; the input is ``src`` (same size) or, when None, ``buf`` itself.
        Hierarchical (host by host) when the config asks and the set spans hosts, else flat."""
        lay = hierarchical.plan(self.config, comm, buf)
        extra = None if lay is None else {V.ARG_HIERARCHICAL: True}
        with activity(comm, self.allreduce_activity, buf.nbytes, self.name, extra):
            if lay is not None:
                hierarchical.allreduce(self, buf, op, comm, buf if src is None else src, lay)
            else:
                self.flat_allreduce(buf, op, comm, src, phases=True)

    def flat_allreduce(self, buf, op, comm, src=None, phases=False) -> None:
        """MPI's allreduce over ``comm``, without the span (``phases``: nothing nested to record)."""
        from mpi4py import MPI
        if comm.size == 1 or buf.size == 0:
            if src is not None and src is not buf:
                buf[...] = src
            return
        if buf.dtype == np.float16:
            work = (buf if src is None else src).astype(np.float32)
            mpi_wait.wait(comm.mpi.Iallreduce(MPI.IN_PLACE, work, mpi_op(op)))
            buf[...] = work
        elif src is None or src is buf:
            mpi_wait.wait(comm.mpi.Iallreduce(MPI.IN_PLACE, buf, mpi_op(op)))
        else:
            mpi_wait.wait(comm.mpi.Iallreduce(src, buf, mpi_op(op)))

    def allgather(self, send, recv, counts, comm) -> None:
        from mpi4py import MPI
        item = send.dtype.itemsize
        bcounts = [c * item for c in counts]
        with activity(comm, V.MPI_ALLGATHER, recv.nbytes, self.backend_label()):
            mpi_wait.wait(comm.mpi.Iallgatherv(
                [_bytes(send), MPI.BYTE], [_bytes(recv), bcounts, _displs(bcounts), MPI.BYTE]))

    def broadcast(self, buf, root, comm) -> None:
        from mpi4py import MPI
        with activity(comm, V.MPI_BCAST, buf.nbytes, self.backend_label()):
            if comm.size > 1:
                mpi_wait.wait(comm.mpi.Ibcast([_bytes(buf), MPI.BYTE], root=root))

    def alltoall(self, send, send_counts, recv, recv_counts, comm) -> None:
        from mpi4py import MPI
        item = send.dtype.itemsize
        sc = [c * item for c in send_counts]
        rc = [c * item for c in recv_counts]
        with activity(comm, V.MPI_ALLTOALL, send.nbytes, self.backend_label()):
            mpi_wait.wait(comm.mpi.Ialltoallv([_bytes(send), sc, _displs(sc), MPI.BYTE],
                                              [_bytes(recv), rc, _displs(rc), MPI.BYTE]))

    def reducescatter(self, send, recv, counts, op, comm) -> None:
        with activity(comm, V.MPI_REDUCESCATTER, send.nbytes, self.backend_label()):
            work, upcast = _reducible(send)
            out = recv.astype(np.float32) if upcast else recv
            mpi_wait.wait(comm.mpi.Ireduce_scatter(work, out, list(counts), mpi_op(op)))
            if upcast:
                recv[...] = out

    def barrier(self, comm) -> None:
        with activity(comm, V.MPI_BARRIER, 0, self.backend_label()):
            mpi_wait.wait(comm.mpi.Ibarrier())

    def backend_label(self) -> str:
        return self.name

