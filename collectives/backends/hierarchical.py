"""Hierarchical allreduce for the ``ring`` and ``mpi`` backends (RINGSCOPE_HIERARCHICAL_ALLREDUCE).

The buffer is cut into one shard per local rank. Three steps, as Horovod does it:
1. within each host, a reduce-scatter: local rank j ends with shard j reduced over its host
   (point to point over shared memory, reduced with numpy, so every dtype works);
2. across hosts, local rank j allreduces shard j with the local rank j of every other host (the
   backend's own flat allreduce: a ring, or MPI's), all local ranks at once;
3. within each host, an allgather of the shards.
Each host's link carries the buffer once each way (2·(H-1)/H of it over H hosts, spread over the
host's ranks), where a flat ring with L ranks per host sends 2·(P-1)/P of it through each of the
host's ring hops that leave it. docs/MULTIHOST.md has the measurements, and why the shards cross in
parallel rather than through one rank per host.

A process set's host layout (a communicator per host, one per local rank across hosts) is built
once, at its first hierarchical allreduce, on the engine thread, and kept in ``comm.backend_state``.
One host, one rank per host, or hosts with different rank counts: the set runs flat.
"""
from __future__ import annotations

import numpy as np

from collectives import mpi_wait
from collectives.backends.base import activity, chunk_bounds
from collectives.ops import numpy_ufunc
from collectives.process_sets import CommInfo
from tracer import vocab as V

# mpi4py.MPI is imported where it is used: importing it starts MPI, which collectives.init does first

KEY = "hierarchical"
TAG = 8


def fallback_reason(counts) -> str | None:
    """Why a set whose ranks have ``counts`` (per rank: (is local rank 0, ranks on its host))
    runs flat, or None."""
    hosts, sizes = int(counts[:, 0].sum()), counts[:, 1]
    if hosts <= 1:
        return "one host"
    if sizes.max() <= 1:
        return "one rank per host"
    if sizes.min() != sizes.max():
        return "hosts with different rank counts"
    return None


def enabled(config) -> bool:
    return bool(getattr(config, "hierarchical_allreduce", False))


class HostLayout:
    """A process set's ranks by host: ``local`` (this host's communicator), ``cross`` (a CommInfo
    over the ranks with this local rank, one per host), ``fallback`` (why it runs flat, or None)."""

    __slots__ = ("local", "cross", "fallback")

    def __init__(self, local, cross, fallback):
        self.local, self.cross, self.fallback = local, cross, fallback

    def close(self) -> None:
        for c in (self.local, self.cross.mpi if self.cross is not None else None):
            if c is not None:
                c.Free()
        self.local = self.cross = None


def host_counts(mpi_comm, local) -> np.ndarray:
    """Per rank of ``mpi_comm``: (1 if it is its host's local rank 0, its host's rank count)."""
    mine = np.array([local.Get_rank() == 0, local.Get_size()], dtype=np.int64)
    every = np.empty(2 * mpi_comm.Get_size(), dtype=np.int64)
    mpi_wait.wait(mpi_comm.Iallgather(mine, every))
    return every.reshape(-1, 2)


def layout(comm: CommInfo) -> HostLayout:
    """The set's host layout, built on first use (collective over the set: every member runs the
    same response, so they all get here together)."""
    lay = comm.backend_state.get(KEY)
    if lay is None:
        lay = comm.backend_state[KEY] = _build(comm)
    return lay


def _build(comm: CommInfo) -> HostLayout:
    from mpi4py import MPI
    mpi_wait.wait(comm.mpi.Ibarrier())   # line up first: the splits below block (and spin)
    local = comm.mpi.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    counts = host_counts(comm.mpi, local)
    reason = fallback_reason(counts)
    if reason is not None:
        local.Free()
        return HostLayout(None, None, reason)
    cross = comm.mpi.Split(local.Get_rank(), comm.rank)
    members = np.empty(cross.Get_size(), dtype=np.int64)
    mpi_wait.wait(cross.Iallgather(np.array([comm.ranks[comm.rank]], dtype=np.int64), members))
    return HostLayout(local, CommInfo(comm.set_id, members.tolist(), cross.Get_rank(), cross), None)


def plan(config, comm: CommInfo, buf) -> HostLayout | None:
    """The layout to run ``buf``'s allreduce on hierarchically, or None to run it flat."""
    if not enabled(config) or comm.size == 1 or buf.size == 0:
        return None
    lay = layout(comm)
    return None if lay.fallback else lay


def allreduce(backend, buf, op, comm: CommInfo, src, lay: HostLayout) -> None:
    """Reduce ``src`` into ``buf`` over the set, host by host; the caller holds the outer span.
    ``backend.flat_allreduce(buf, op, comm)`` runs the cross-host step."""
    from mpi4py import MPI
    local, name = lay.local, backend.name
    size, me = local.Get_size(), local.Get_rank()
    bounds = chunk_bounds(buf.size, size)
    item = buf.dtype.itemsize
    lo, hi = bounds[me], bounds[me + 1]
    with activity(comm, V.INTRA_HOST_REDUCE, buf.nbytes, name, {V.ARG_LINK: V.LINK_INTRA}):
        reqs = [local.Isend(src[bounds[k]:bounds[k + 1]].view(np.uint8), k, TAG)
                for k in range(size) if k != me and bounds[k + 1] > bounds[k]]
        mine = buf[lo:hi]
        if src is not buf:
            mine[...] = src[lo:hi]
        if hi > lo:
            # one peer at a time into one shard of scratch (memory stays at one shard); each shard
            # is reduced by one rank only, so every rank still ends with the same bits
            ufunc = numpy_ufunc(op)
            scratch = backend.scratch_of(hi - lo, buf.dtype)
            for peer in range(size):
                if peer != me:
                    mpi_wait.wait(local.Irecv(scratch.view(np.uint8), peer, TAG))
                    ufunc(mine, scratch, out=mine)
        mpi_wait.wait_all(reqs)
    lay.cross.response = comm.response
    with activity(lay.cross, V.CROSS_HOST_ALLREDUCE, mine.nbytes, name, {V.ARG_LINK: V.LINK_CROSS}):
        backend.flat_allreduce(mine, op, lay.cross)
    with activity(comm, V.INTRA_HOST_BROADCAST, buf.nbytes, name, {V.ARG_LINK: V.LINK_INTRA}):
        counts = [(bounds[k + 1] - bounds[k]) * item for k in range(size)]
        displs = [b * item for b in bounds[:-1]]
        mpi_wait.wait(local.Iallgatherv(MPI.IN_PLACE, [buf.view(np.uint8), counts, displs, MPI.BYTE]))
