"""``ring`` backend: a ring allreduce over MPI point-to-point on numpy buffers.

Large buffers: reduce-scatter then allgather around the ring (2·(P-1) steps, each an Irecv from the
left and an Isend to the right; chunk sizes differ by at most one element, empty chunks are skipped
on both sides). Rank r ends the reduce-scatter owning chunk r. Small buffers (when bytes·(P-1) ≤
``DIRECT_BUDGET``): one exchange of whole buffers with every peer, then every rank reduces the P
contributions in set-rank order, which gives bit-identical results everywhere after one message
latency instead of the ring's 2·(P-1) sequential ones (each a poll wake-up on a busy host).
Other ops use MPI's native nonblocking collectives (inherited from the mpi backend).
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from collectives import mpi_wait
from collectives.backends.base import activity, chunk_bounds
from collectives.backends.mpi import MpiBackend
from collectives.ops import numpy_ufunc
from tracer import vocab as V

DIRECT_BUDGET = int(os.environ.get("RINGSCOPE_RING_DIRECT_BUDGET", 256 * 1024))
TAG = 7


class RingBackend(MpiBackend):
    name = "ring"

    allreduce_activity = V.RING_ALLREDUCE

    def flat_allreduce(self, buf, op, comm, src=None, phases=False) -> None:
        """The ring (or direct exchange) over ``comm``, without the outer span; ``phases`` records
        the ring's reduce-scatter and allgather spans."""
        src = buf if src is None else src
        if comm.size == 1 or buf.size == 0:
            if src is not buf:
                buf[...] = src
            return
        if buf.nbytes * (comm.size - 1) <= DIRECT_BUDGET:
            self._direct(buf, op, comm, src)
        else:
            self._ring(buf, op, comm, src, phases)

    def _direct(self, buf, op, comm, src) -> None:
        p, me, mpi, n = comm.size, comm.rank, comm.mpi, buf.size
        slots = self.scratch_of(p * n, buf.dtype).reshape(p, n)
        reqs = []
        for peer in range(p):
            if peer != me:
                reqs.append(mpi.Irecv(slots[peer].view(np.uint8), peer, TAG))
        mine = src.view(np.uint8)
        for peer in range(p):
            if peer != me:
                reqs.append(mpi.Isend(mine, peer, TAG))
        slots[me] = src
        mpi_wait.wait_all(reqs)
        numpy_ufunc(op).reduce(slots, axis=0, out=buf)

    def _ring(self, buf, op, comm, src, phases) -> None:
        # out of place without a copy: step 0 sends from src, every reduction reads src and writes
        # buf, and the allgather fills the one chunk no reduction wrote
        p, me, mpi = comm.size, comm.rank, comm.mpi
        left, right = (me - 1) % p, (me + 1) % p
        bounds = chunk_bounds(buf.size, p)
        ufunc = numpy_ufunc(op)
        scratch = self.scratch_of(bounds[1] - bounds[0], buf.dtype)
        raw = buf.view(np.uint8)
        raw_src = src.view(np.uint8)
        item = buf.dtype.itemsize

        def chunk(i):
            i %= p
            return bounds[i], bounds[i + 1]

        with _phase(phases, comm, V.RING_REDUCE_SCATTER, buf.nbytes, self.name):
            for step in range(p - 1):
                s0, s1 = chunk(me - step - 1)
                r0, r1 = chunk(me - step - 2)
                reqs = []
                if r1 > r0:
                    tmp = scratch[:r1 - r0]
                    reqs.append(mpi.Irecv(tmp.view(np.uint8), left, TAG))
                if s1 > s0:
                    out = raw_src if step == 0 else raw
                    reqs.append(mpi.Isend(out[s0 * item:s1 * item], right, TAG))
                mpi_wait.wait_all(reqs)
                if r1 > r0:
                    ufunc(src[r0:r1], tmp, out=buf[r0:r1])
        with _phase(phases, comm, V.RING_ALLGATHER, buf.nbytes, self.name):
            for step in range(p - 1):
                s0, s1 = chunk(me - step)
                r0, r1 = chunk(me - step - 1)
                reqs = []
                if r1 > r0:
                    reqs.append(mpi.Irecv(raw[r0 * item:r1 * item], left, TAG))
                if s1 > s0:
                    reqs.append(mpi.Isend(raw[s0 * item:s1 * item], right, TAG))
                mpi_wait.wait_all(reqs)


def _phase(on, comm, name, nbytes, backend):
    return activity(comm, name, nbytes, backend) if on else contextlib.nullcontext()

