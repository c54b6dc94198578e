"""The numpy-facing collective ops (``collectives.allreduce`` etc.)."""
from __future__ import annotations

from collectives.engine import get_engine
from collectives.entry import Entry
from collectives.handles import GroupHandle
from collectives.ops import Average
from collectives.process_sets import set_id_of
from tracer import vocab as V

_NUMPY = None


def _numpy():
    global _NUMPY
    if _NUMPY is None:   # imported on first use (numpy stays out of import time)
        from collectives.adapters import NUMPY
        _NUMPY = NUMPY
    return _NUMPY


def _submit(op_type, array, name, process_set, **kw):
    ad = _numpy()
    e = Entry(name, op_type, ad.coerce(array), ad,
              process_set=0 if process_set is None else set_id_of(process_set), **kw)
    return get_engine().enqueue(e)


def poll(handle) -> bool:
    """True when the async op behind ``handle`` has finished."""
    return handle.poll()


def synchronize(handle):
    """Wait for an async op; return its result or raise its error (CollectiveError)."""
    return handle.wait()


def allreduce_async(array, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=None, priority=0):
    """Start an allreduce of ``array`` over the process set; returns a handle. Among ops ready in
    the same cycle, a higher ``priority`` runs first (in its own response)."""
    return _submit(V.ALLREDUCE, array, name, process_set, reduce_op=op,
                   prescale=prescale_factor, postscale=postscale_factor, priority=int(priority))


def allreduce(array, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
              process_set=None, priority=0):
    """Reduce ``array`` across ranks (default: average); returns a new array."""
    return allreduce_async(array, name, op, prescale_factor, postscale_factor,
                           process_set, priority).wait()


def allreduce_async_(array, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None, priority=0):
    """In-place allreduce: ``array`` itself receives the result; returns a handle."""
    return _submit(V.ALLREDUCE, array, name, process_set, reduce_op=op, output=array,
                   prescale=prescale_factor, postscale=postscale_factor, priority=int(priority))


def allreduce_(array, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
               process_set=None, priority=0):
    """In-place allreduce of ``array``; returns ``array``."""
    return allreduce_async_(array, name, op, prescale_factor, postscale_factor,
                            process_set, priority).wait()


def grouped_allreduce_async(arrays, name=None, op=Average, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None, priority=0):
    """Start allreduces of several arrays negotiated and fused as one group; returns one handle
    whose result is the list of reduced arrays."""
    eng = get_engine()
    sid = set_id_of(process_set)
    if name is None:
        name = eng.noname("grouped_allreduce", sid)
    ad = _numpy()
    entries = [Entry(f"{name}.{i}", V.ALLREDUCE, ad.coerce(a), ad, reduce_op=op,
                     prescale=prescale_factor, postscale=postscale_factor, process_set=sid,
                     priority=int(priority))
               for i, a in enumerate(arrays)]
    return GroupHandle(eng.enqueue_group(entries, group=name), name)


def grouped_allreduce(arrays, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=None, priority=0):
    """Allreduce several arrays as one fused group; returns a list of new arrays."""
    return grouped_allreduce_async(arrays, name, op, prescale_factor, postscale_factor,
                                   process_set, priority).wait()


def allgather_async(array, name=None, process_set=None):
    return _submit(V.ALLGATHER, array, name, process_set)


def allgather(array, name=None, process_set=None):
    """Concatenate every rank's array along the first dimension (which may differ by rank)."""
    return allgather_async(array, name, process_set).wait()


def broadcast_async(array, root_rank, name=None, process_set=None):
    return _submit(V.BROADCAST, array, name, process_set, root=int(root_rank))


def broadcast(array, root_rank, name=None, process_set=None):
    """Every rank gets ``root_rank``'s array (root_rank is the rank within the process set)."""
    return broadcast_async(array, root_rank, name, process_set).wait()


def broadcast_async_(array, root_rank, name=None, process_set=None):
    return _submit(V.BROADCAST, array, name, process_set, root=int(root_rank), output=array)


def broadcast_(array, root_rank, name=None, process_set=None):
    """In-place broadcast: ``array`` receives root_rank's values; returns ``array``."""
    return broadcast_async_(array, root_rank, name, process_set).wait()


def alltoall_async(array, splits=None, name=None, process_set=None):
    return _submit(V.ALLTOALL, array, name, process_set, splits=splits)


def alltoall(array, splits=None, name=None, process_set=None, return_received_splits=False):
    """Send ``splits[i]`` rows (even split by default) to rank i; returns the received rows
    concatenated in rank order (and the received splits when asked)."""
    h = alltoall_async(array, splits, name, process_set)
    out = h.wait()
    if return_received_splits:
        return out, h.received_splits
    return out


def reducescatter_async(array, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=None):
    return _submit(V.REDUCESCATTER, array, name, process_set, reduce_op=op,
                   prescale=prescale_factor, postscale=postscale_factor)


def reducescatter(array, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=None):
    """Reduce across ranks and keep this rank's block of rows (first ranks get the extra rows)."""
    return reducescatter_async(array, name, op, prescale_factor, postscale_factor,
                               process_set).wait()


def join() -> int:
    """Declare that this rank has no more data: until every rank has joined, this rank takes part in
    the others' allreduces with zeros (Average still divides by the full set size). Returns the
    last rank to join. Other op types fail while some rank has joined."""
    e = Entry("__join__", V.JOIN, None, None)
    return get_engine().enqueue(e).wait()


def barrier(process_set=None) -> None:
    """Block until every rank of the process set reaches the barrier."""
    e = Entry(None, V.BARRIER, None, None, process_set=set_id_of(process_set))
    get_engine().enqueue(e).wait()
