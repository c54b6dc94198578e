"""What the gloo and NCCL backends share: one torch.distributed process group per process set,
the reduce-op mapping, and the collectives on flat buffers.

Groups are built straight from a ``TCPStore`` (see :mod:`collectives.torch.rendezvous`) with the
process set's own rank order (set rank ``i`` is global rank ``comm.ranks[i]``, i.e. the MPI order),
never through torch's global default group, so every process set gets its own group.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from collectives.backends.base import Backend, activity
from collectives.ops import ReduceOp


def torch_reduce_op(op):
    """The engine's op as a ``torch.distributed.ReduceOp`` (Average never reaches a backend)."""
    table = {ReduceOp.Sum: dist.ReduceOp.SUM, ReduceOp.Min: dist.ReduceOp.MIN,
             ReduceOp.Max: dist.ReduceOp.MAX, ReduceOp.Product: dist.ReduceOp.PRODUCT}
    if op not in table:
        raise ValueError(f"backend reductions are Sum/Min/Max/Product, got {op!r}")
    return table[op]


def as_torch(buf) -> torch.Tensor:
    """A flat buffer (numpy array or tensor) as a tensor sharing its memory."""
    return torch.from_numpy(buf) if isinstance(buf, np.ndarray) else buf


@dataclass(frozen=True)
class GroupSpec:
    """How one process set's group is made: store prefix, rank within the set, set size."""
    prefix: str
    rank: int
    size: int
    global_ranks: tuple


def group_spec(backend: str, comm) -> GroupSpec:
    """The group parameters for ``comm`` (a :class:`collectives.process_sets.CommInfo`)."""
    return GroupSpec(f"ringscope/{backend}/set{comm.set_id}/{','.join(map(str, comm.ranks))}",
                     comm.rank, comm.size, tuple(comm.ranks))


def gather_plan(counts) -> tuple[int, list[int]]:
    """(padded count per rank, displacement of each rank's block) for an uneven allgather."""
    displs, acc = [], 0
    for c in counts:
        displs.append(acc)
        acc += int(c)
    return max(int(c) for c in counts) if counts else 0, displs


class TorchDistBackend(Backend):
    """Collectives through a ``torch.distributed`` ProcessGroup; subclasses say how to make the
    group (``make_group``), what the activities are called, and how to wait for the work."""

    name = "abstract"
    names: dict = {}

    def __init__(self, config=None):
        self.config = config

    # subclasses -------------------------------------------------------------------------------
    def make_group(self, spec: GroupSpec):
        raise NotImplementedError

    def finish(self, work, buf) -> None:
        work.wait()

    def barrier_device(self) -> str:
        return "cpu"

    # groups -----------------------------------------------------------------------------------
    def group(self, comm):
        pg = comm.backend_state.get(self.name)
        if pg is None:
            pg = comm.backend_state[self.name] = self.make_group(group_spec(self.name, comm))
        return pg

    def _span(self, comm, what, nbytes):
        return activity(comm, self.names[what], nbytes, self.name)

    # collectives ------------------------------------------------------------------------------
    def allreduce(self, buf, op, comm) -> None:
        t = as_torch(buf)
        with self._span(comm, "allreduce", t.numel() * t.element_size()):
            if comm.size == 1 or t.numel() == 0:
                return
            opts = dist.AllreduceOptions()
            opts.reduceOp = torch_reduce_op(op)
            self.finish(self.group(comm).allreduce([t], opts), t)

    def allgather(self, send, recv, counts, comm) -> None:
        s, r = as_torch(send), as_torch(recv)
        with self._span(comm, "allgather", r.numel() * r.element_size()):
            if comm.size == 1:
                r[:s.numel()].copy_(s)
                return
            pad, displs = gather_plan(counts)
            if all(int(c) == pad for c in counts):
                self.finish(self.group(comm)._allgather_base(r, s), r)
                return
            padded = s.new_zeros(pad)
            padded[:s.numel()].copy_(s)
            out = s.new_empty(pad * comm.size)
            self.finish(self.group(comm)._allgather_base(out, padded), out)
            for i, (c, d) in enumerate(zip(counts, displs)):
                r[d:d + c].copy_(out[i * pad:i * pad + c])

    def broadcast(self, buf, root, comm) -> None:
        t = as_torch(buf)
        with self._span(comm, "broadcast", t.numel() * t.element_size()):
            if comm.size == 1 or t.numel() == 0:
                return
            opts = dist.BroadcastOptions()
            opts.rootRank, opts.rootTensor = int(root), 0
            self.finish(self.group(comm).broadcast([t], opts), t)

    def alltoall(self, send, send_counts, recv, recv_counts, comm) -> None:
        s, r = as_torch(send), as_torch(recv)
        with self._span(comm, "alltoall", s.numel() * s.element_size()):
            if comm.size == 1:
                r.copy_(s)
                return
            work = self.group(comm).alltoall_base(r, s, [int(c) for c in recv_counts],
                                                  [int(c) for c in send_counts],
                                                  dist.AllToAllOptions())
            self.finish(work, r)

    def reducescatter(self, send, recv, counts, op, comm) -> None:
        s, r = as_torch(send), as_torch(recv)
        with self._span(comm, "reducescatter", s.numel() * s.element_size()):
            if comm.size == 1:
                r.copy_(s[:r.numel()])
                return
            if all(int(c) == int(counts[0]) for c in counts):
                opts = dist.ReduceScatterOptions()
                opts.reduceOp = torch_reduce_op(op)
                self.finish(self.group(comm)._reduce_scatter_base(r, s, opts), r)
                return
            # uneven blocks: reduce everything, keep this rank's block
            whole = s.clone()
            opts = dist.AllreduceOptions()
            opts.reduceOp = torch_reduce_op(op)
            self.finish(self.group(comm).allreduce([whole], opts), whole)
            _, displs = gather_plan(counts)
            r.copy_(whole[displs[comm.rank]:displs[comm.rank] + int(counts[comm.rank])])

    def barrier(self, comm) -> None:
        with self._span(comm, "barrier", 0):
            if comm.size == 1:
                return
            token = torch.zeros(1, device=self.barrier_device())
            opts = dist.AllreduceOptions()
            opts.reduceOp = dist.ReduceOp.SUM
            self.finish(self.group(comm).allreduce([token], opts), token)

    def close(self) -> None:
        pass
