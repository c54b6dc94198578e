"""Hierarchical allreduce for the ``ring`` and ``mpi`` backends (RINGSCOPE_HIERARCHICAL_ALLREDUCE).

Three steps: reduce within each host to the host's local rank 0 (point to point over shared
memory, reduced with numpy in local-rank order, so every dtype works), allreduce across hosts among
the local rank 0s with the backend's own flat allreduce, broadcast within each host. Only one rank
per host sends over the host's link, carrying the buffer once each way, where a flat ring on L ranks
per host sends 2·(P-1)/P of it over each host's link (see docs/MULTIHOST.md for the measurements).

The host layout of a process set (a communicator per host and one across hosts) is built once, at
the set's first hierarchical allreduce, on the engine thread, and kept in ``comm.backend_state``.
With one host, or one rank per host, there is nothing to gain: the set runs flat.
"""
from __future__ import annotations

import numpy as np

from collectives import mpi_wait
from collectives.backends.base import activity
from collectives.ops import numpy_ufunc
from collectives.process_sets import CommInfo
from tracer import vocab as V

KEY = "hierarchical"
TAG = 8


def fallback_reason(hosts: int, most_local: int) -> str | None:
    """Why a layout of ``hosts`` hosts with at most ``most_local`` ranks on one runs flat, or None."""
    if hosts <= 1:
        return "one host"
    if most_local <= 1:
        return "one rank per host"
    return None


def enabled(config) -> bool:
    return bool(getattr(config, "hierarchical_allreduce", False))


class HostLayout:
    """A process set's ranks by host: ``local`` (this host's communicator), ``cross`` (a CommInfo
    over the local rank 0s; None elsewhere), ``fallback`` (why the set runs flat, or None)."""

    __slots__ = ("local", "cross", "peers", "fallback")

    def __init__(self, local, cross, fallback, peers=None):
        self.local, self.cross, self.fallback, self.peers = local, cross, fallback, peers

    def close(self) -> None:
        for c in (self.local, self.cross.mpi if self.cross is not None else None,
                  self.peers.mpi if self.peers is not None else None):
            if c is not None:
                c.Free()
        self.local = self.cross = self.peers = None


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
    reason = fallback_reason(int(counts[:, 0].sum()), int(counts[:, 1].max()))
    if reason is not None:
        local.Free()
        return HostLayout(None, None, reason)
    is_root = local.Get_rank() == 0
    cross = comm.mpi.Split(0 if is_root else MPI.UNDEFINED, comm.rank)
    info = None
    if is_root:
        roots = [comm.ranks[i] for i in np.flatnonzero(counts[:, 0])]
        info = CommInfo(comm.set_id, roots, cross.Get_rank(), cross)
    peers = None
    if (counts[:, 1] == counts[0, 1]).all():
        pc = comm.mpi.Split(local.Get_rank(), comm.rank)
        peers = CommInfo(comm.set_id, list(range(pc.Get_size())), pc.Get_rank(), pc)
    return HostLayout(local, info, None, peers)


def plan(config, comm: CommInfo, buf) -> HostLayout | None:
    """The layout to run ``buf``'s allreduce on hierarchically, or None to run it flat."""
    if not enabled(config) or comm.size == 1 or buf.size == 0:
        return None
    lay = layout(comm)
    return None if lay.fallback else lay


def allreduce(backend, buf, op, comm: CommInfo, src, lay: HostLayout) -> None:
    """Reduce ``src`` into ``buf`` over the set, host by host; the caller holds the outer span.
    ``backend.flat_allreduce(buf, op, comm, src)`` runs the cross-host step."""
    if getattr(backend.config, "hierarchical_split", False) and lay.peers is not None:
        _split(backend, buf, op, comm, src, lay)
        return
    local = lay.local
    size, me, name = local.Get_size(), local.Get_rank(), backend.name
    raw = buf.view(np.uint8)
    with activity(comm, V.INTRA_HOST_REDUCE, buf.nbytes, name, {V.ARG_LINK: V.LINK_INTRA}):
        if me != 0:
            mpi_wait.wait(local.Isend(src.view(np.uint8), 0, TAG))
        elif size == 1:
            buf[...] = src
        else:
            # one peer at a time into one scratch buffer: memory stays at one buffer, and the
            # order (local rank 1, 2, ...) is the same on every host
            ufunc = numpy_ufunc(op)
            scratch = backend.scratch_of(buf.size, buf.dtype)
            acc = src
            for peer in range(1, size):
                mpi_wait.wait(local.Irecv(scratch.view(np.uint8), peer, TAG))
                ufunc(acc, scratch, out=buf)
                acc = buf
    if lay.cross is not None:
        lay.cross.response = comm.response
        with activity(comm, V.CROSS_HOST_ALLREDUCE, buf.nbytes, name, {V.ARG_LINK: V.LINK_CROSS}):
            backend.flat_allreduce(buf, op, lay.cross)
    with activity(comm, V.INTRA_HOST_BROADCAST, buf.nbytes, name, {V.ARG_LINK: V.LINK_INTRA}):
        if size > 1:
            from mpi4py import MPI
            mpi_wait.wait(local.Ibcast([raw, MPI.BYTE], root=0))


def _split(backend, buf, op, comm, src, lay):
    from mpi4py import MPI

    from collectives.backends.ring import chunk_bounds
    local = lay.local
    size, me, name = local.Get_size(), local.Get_rank(), backend.name
    bounds = chunk_bounds(buf.size, size)
    item = buf.dtype.itemsize
    lo, hi = bounds[me], bounds[me + 1]
    with activity(comm, V.INTRA_HOST_REDUCE, buf.nbytes, name, {V.ARG_LINK: V.LINK_INTRA}):
        reqs = [local.Isend(src[bounds[k]:bounds[k + 1]].view(np.uint8), k, TAG)
                for k in range(size) if k != me and bounds[k + 1] > bounds[k]]
        ufunc = numpy_ufunc(op)
        scratch = backend.scratch_of(hi - lo, buf.dtype)
        buf[lo:hi] = src[lo:hi]
        for peer in range(size):
            if peer != me and hi > lo:
                mpi_wait.wait(local.Irecv(scratch.view(np.uint8), peer, TAG))
                ufunc(buf[lo:hi], scratch, out=buf[lo:hi])
        mpi_wait.wait_all(reqs)
    lay.peers.response = comm.response
    with activity(comm, V.CROSS_HOST_ALLREDUCE, (hi - lo) * item, name, {V.ARG_LINK: V.LINK_CROSS}):
        backend.flat_allreduce(buf[lo:hi], op, lay.peers)
    with activity(comm, V.INTRA_HOST_BROADCAST, buf.nbytes, name, {V.ARG_LINK: V.LINK_INTRA}):
        counts = [(bounds[k + 1] - bounds[k]) * item for k in range(size)]
        displs = [b * item for b in bounds[:-1]]
        mpi_wait.wait(local.Iallgatherv(MPI.IN_PLACE, [buf.view(np.uint8), counts, displs, MPI.BYTE]))
