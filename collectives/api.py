"""The numpy-facing collective ops (``collectives.allreduce`` etc.)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast, overload

from collectives.engine import get_engine
from collectives.entry import Entry
from collectives.handles import GroupHandle, Handle
from collectives.ops import Average, ReduceOp, as_op
from collectives.process_sets import ProcessSet, set_id_of
from tracer import vocab as V

if TYPE_CHECKING:
    import numpy as np

    from collectives.adapters import NumpyAdapter

# what ``process_set=`` takes: a registered ProcessSet, its id, or None for the global set
ProcessSetArg: TypeAlias = "ProcessSet | int | None"
# an op's reduction: a ReduceOp or its name ("sum", "Average", ...)
OpArg: TypeAlias = "ReduceOp | str"

_NUMPY: NumpyAdapter | None = None


def _numpy() -> NumpyAdapter:
    global _NUMPY
    if _NUMPY is None:   # imported on first use (numpy stays out of import time)
        from collectives.adapters import NUMPY
        _NUMPY = NUMPY
    return _NUMPY


def _submit(op_type: str, array: np.ndarray | np.generic, name: str | None, process_set: ProcessSetArg,
            **kw: Any) -> Handle:
    ad = _numpy()
    e = Entry(name, op_type, ad.coerce(array), ad,
              process_set=0 if process_set is None else set_id_of(process_set), **kw)
    return get_engine().enqueue(e)


def poll(handle: Handle | GroupHandle) -> bool:
    """True when the async op behind ``handle`` has finished."""
    return handle.poll()


@overload
def synchronize(handle: GroupHandle) -> list[np.ndarray]: ...
@overload
def synchronize(handle: Handle) -> np.ndarray: ...
def synchronize(handle: Handle | GroupHandle) -> np.ndarray | list[np.ndarray]:
    """Wait for an async op; return its result or raise its error (CollectiveError)."""
    return handle.wait()


def allreduce_async(array: np.ndarray | np.generic, name: str | None = None, op: OpArg = Average,
                    prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                    process_set: ProcessSetArg = None, priority: int = 0) -> Handle:
    """Start an allreduce of ``array`` over the process set; returns a handle. Among ops ready in
    the same cycle, a higher ``priority`` runs first (in its own response)."""
    return _submit(V.ALLREDUCE, array, name, process_set, reduce_op=op,
                   prescale=prescale_factor, postscale=postscale_factor, priority=int(priority))


def allreduce(array: np.ndarray | np.generic, name: str | None = None, op: OpArg = Average,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              process_set: ProcessSetArg = None, priority: int = 0) -> np.ndarray:
    """Reduce ``array`` across ranks (default: average); returns a new array."""
    return allreduce_async(array, name, op, prescale_factor, postscale_factor,
                           process_set, priority).wait()


def allreduce_async_(array: np.ndarray | np.generic, name: str | None = None, op: OpArg = Average,
                     prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                     process_set: ProcessSetArg = None, priority: int = 0) -> Handle:
    """In-place allreduce: ``array`` itself receives the result; returns a handle."""
    return _submit(V.ALLREDUCE, array, name, process_set, reduce_op=op, output=array,
                   prescale=prescale_factor, postscale=postscale_factor, priority=int(priority))


def allreduce_(array: np.ndarray | np.generic, name: str | None = None, op: OpArg = Average,
               prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               process_set: ProcessSetArg = None, priority: int = 0) -> np.ndarray:
    """In-place allreduce of ``array``; returns ``array``."""
    return allreduce_async_(array, name, op, prescale_factor, postscale_factor,
                            process_set, priority).wait()


def grouped_allreduce_async(arrays: Iterable[np.ndarray | np.generic], name: str | None = None,
                            op: OpArg = Average, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                            process_set: ProcessSetArg = None, priority: int = 0) -> GroupHandle:
    """Start allreduces of several arrays negotiated and fused as one group; returns one handle
    whose result is the list of reduced arrays."""
    eng = get_engine()
    sid = set_id_of(process_set)
    if name is None:
        name = eng.noname("grouped_allreduce", sid)
    ad, reduce_op = _numpy(), as_op(op)
    entries = [Entry(f"{name}.{i}", V.ALLREDUCE, ad.coerce(a), ad, reduce_op=reduce_op,
                     prescale=prescale_factor, postscale=postscale_factor, process_set=sid,
                     priority=int(priority))
               for i, a in enumerate(arrays)]
    return GroupHandle(eng.enqueue_group(entries, group=name), name)


def grouped_allreduce(arrays: Iterable[np.ndarray | np.generic], name: str | None = None,
                      op: OpArg = Average, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: ProcessSetArg = None, priority: int = 0) -> list[np.ndarray]:
    """Allreduce several arrays as one fused group; returns a list of new arrays."""
    return grouped_allreduce_async(arrays, name, op, prescale_factor, postscale_factor,
                                   process_set, priority).wait()


def allgather_async(array: np.ndarray | np.generic, name: str | None = None,
                    process_set: ProcessSetArg = None) -> Handle:
    return _submit(V.ALLGATHER, array, name, process_set)


def allgather(array: np.ndarray | np.generic, name: str | None = None,
              process_set: ProcessSetArg = None) -> np.ndarray:
    """Concatenate every rank's array along the first dimension (which may differ by rank)."""
    return allgather_async(array, name, process_set).wait()


def broadcast_async(array: np.ndarray | np.generic, root_rank: int, name: str | None = None,
                    process_set: ProcessSetArg = None) -> Handle:
    return _submit(V.BROADCAST, array, name, process_set, root=int(root_rank))


def broadcast(array: np.ndarray | np.generic, root_rank: int, name: str | None = None,
              process_set: ProcessSetArg = None) -> np.ndarray:
    """Every rank gets ``root_rank``'s array (root_rank is the rank within the process set)."""
    return broadcast_async(array, root_rank, name, process_set).wait()


def broadcast_async_(array: np.ndarray | np.generic, root_rank: int, name: str | None = None,
                     process_set: ProcessSetArg = None) -> Handle:
    return _submit(V.BROADCAST, array, name, process_set, root=int(root_rank), output=array)


def broadcast_(array: np.ndarray | np.generic, root_rank: int, name: str | None = None,
               process_set: ProcessSetArg = None) -> np.ndarray:
    """In-place broadcast: ``array`` receives root_rank's values; returns ``array``."""
    return broadcast_async_(array, root_rank, name, process_set).wait()


def alltoall_async(array: np.ndarray | np.generic, splits: Sequence[int] | None = None, name: str | None = None,
                   process_set: ProcessSetArg = None) -> Handle:
    return _submit(V.ALLTOALL, array, name, process_set, splits=splits)


@overload
def alltoall(array: np.ndarray | np.generic, splits: Sequence[int] | None = None, name: str | None = None,
             process_set: ProcessSetArg = None, return_received_splits: Literal[False] = False) -> np.ndarray: ...
@overload
def alltoall(array: np.ndarray | np.generic, splits: Sequence[int] | None, name: str | None,
             process_set: ProcessSetArg, return_received_splits: Literal[True]) -> tuple[np.ndarray, list[int]]: ...
@overload
def alltoall(array: np.ndarray | np.generic, splits: Sequence[int] | None = None, name: str | None = None,
             process_set: ProcessSetArg = None, *,
             return_received_splits: Literal[True]) -> tuple[np.ndarray, list[int]]: ...
def alltoall(array: np.ndarray | np.generic, splits: Sequence[int] | None = None, name: str | None = None,
             process_set: ProcessSetArg = None,
             return_received_splits: bool = False) -> np.ndarray | tuple[np.ndarray, list[int]]:
    """Send ``splits[i]`` rows (even split by default) to rank i; returns the received rows
    concatenated in rank order (and the received splits when asked)."""
    h = alltoall_async(array, splits, name, process_set)
    out = h.wait()
    if return_received_splits:
        return out, cast("list[int]", h.received_splits)   # set by every alltoall that succeeds
    return out


def reducescatter_async(array: np.ndarray | np.generic, name: str | None = None, op: OpArg = Average,
                        prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                        process_set: ProcessSetArg = None) -> Handle:
    return _submit(V.REDUCESCATTER, array, name, process_set, reduce_op=op,
                   prescale=prescale_factor, postscale=postscale_factor)


def reducescatter(array: np.ndarray | np.generic, name: str | None = None, op: OpArg = Average,
                  prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                  process_set: ProcessSetArg = None) -> np.ndarray:
    """Reduce across ranks and keep this rank's block of rows (first ranks get the extra rows)."""
    return reducescatter_async(array, name, op, prescale_factor, postscale_factor,
                               process_set).wait()


def join() -> int:
    """Declare that this rank has no more data: until every rank has joined, this rank takes part in
    the others' allreduces with zeros (Average still divides by the full set size). Returns the
    last rank to join. Other op types fail while some rank has joined."""
    e = Entry("__join__", V.JOIN, None, None)
    return get_engine().enqueue(e).wait()


def barrier(process_set: ProcessSetArg = None) -> None:
    """Block until every rank of the process set reaches the barrier."""
    e = Entry(None, V.BARRIER, None, None, process_set=set_id_of(process_set))
    get_engine().enqueue(e).wait()
