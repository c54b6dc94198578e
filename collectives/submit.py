"""Submit-time checks and the request a rank sends the coordinator for one entry."""
from __future__ import annotations

from collectives import messages as M
from collectives._core import prepare_allreduce
from collectives.config import cpu_backend
from collectives.ops import as_op
from tracer import clock
from tracer import vocab as V

_NEEDS_DIM0 = (V.ALLGATHER, V.ALLTOALL, V.REDUCESCATTER)


def prepare(e, config, sets, rank) -> None:
    """Fill the entry's derived fields and reject what can be rejected locally (ValueError)."""
    comm = sets.get(e.process_set)
    if comm.rank < 0:
        raise ValueError(f"rank {rank} is not a member of process set {e.process_set} "
                         f"(ranks {comm.ranks}); it cannot run {e.op_type.lower()} {e.name!r}")
    if prepare_allreduce(e, cpu_backend(config)):   # a host array's allreduce, in C
        return
    e.reduce_op = as_op(e.reduce_op)
    e.submit_ns = clock.mono_ns()
    ad = e.adapter
    if ad is None:   # barrier / shutdown
        e.backend = e.backend or cpu_backend(config)
        e.dtype, e.shape, e.nbytes, e.device = "", (), 0, "cpu"
        e.trace_key = trace_key(e)
        return
    check = getattr(ad, "check", None)
    if check is not None:
        e.tensor = check(e.tensor)   # may return a converted tensor
    e.dtype, e.shape, e.nbytes = ad.dtype_name(e.tensor), tuple(ad.shape(e.tensor)), \
        int(ad.nbytes(e.tensor))
    e.device = ad.device(e.tensor)
    e.backend = e.backend or ad.default_backend(e.tensor, config)
    numel = 1
    for d in e.shape:
        numel *= d
    e.meta["numel"] = numel
    if e.op_type in _NEEDS_DIM0:
        if not e.shape:
            raise ValueError(f"{e.op_type.lower()} {e.name!r} needs a tensor with at least one "
                             "dimension, got a scalar")
        e.meta["row_numel"] = numel // e.shape[0] if e.shape[0] else _prod(e.shape[1:])
    if e.op_type == V.BROADCAST and not 0 <= e.root < comm.size:
        raise ValueError(f"broadcast {e.name!r}: root_rank {e.root} is outside the process set "
                         f"(size {comm.size})")
    if e.op_type == V.ALLTOALL:
        e.splits = _splits(e, comm.size)
    if e.output is not None and tuple(ad.shape(e.output)) != e.shape and \
            e.op_type in (V.ALLREDUCE, V.BROADCAST):
        raise ValueError(f"{e.name!r}: output shape {tuple(ad.shape(e.output))} differs from "
                         f"the input's {e.shape}")
    e.trace_key = trace_key(e)


def trace_key(e) -> tuple:
    """What the tracer keeps of a finished op (tracer contract, OPS)."""
    return (e.name, e.op_type, e.nbytes, e.dtype, e.shape, e.reduce_op.value, e.process_set,
            e.priority)


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _splits(e, size) -> tuple:
    rows = e.shape[0]
    if e.splits is None:
        if rows % size:
            raise ValueError(f"alltoall {e.name!r}: first dimension {rows} is not divisible by "
                             f"the {size} ranks; pass splits=")
        return (rows // size,) * size
    splits = tuple(int(s) for s in (e.splits.tolist() if hasattr(e.splits, "tolist")
                                    else e.splits))
    if len(splits) != size or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(f"alltoall {e.name!r}: splits {list(splits)} must be {size} "
                         f"non-negative counts summing to the first dimension {rows}")
    return splits


def request_of(e, rank) -> M.Request:
    return M.Request(rank=rank, name=e.name, op_type=e.op_type, dtype=e.dtype, shape=e.shape,
                     reduce_op=e.reduce_op.value, prescale=float(e.prescale),
                     postscale=float(e.postscale), root=int(e.root), splits=e.splits,
                     process_set=e.process_set, device=e.device.split(":")[0], backend=e.backend,
                     group=e.group, group_size=e.group_size, nbytes=e.nbytes, priority=e.priority,
                     adapter=e.adapter.name if e.adapter is not None else "")
