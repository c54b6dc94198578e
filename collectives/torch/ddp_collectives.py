"""torch.distributed's collectives, recorded while a watch's timeline is on (docs/DDP.md): ``all_reduce``,
``all_gather_into_tensor`` / ``all_gather_single`` / ``all_gather`` (FSDP1's on CPU), ``reduce_scatter_tensor``
/ ``reduce_scatter_single``, ``broadcast`` and ``barrier`` are replaced in ``torch.distributed`` by wrappers
that call them unchanged and write each call in the runtime's vocabulary, as the DDP hook writes a bucket: a
tensor op named ``<op>.<group>``, a FUSED_RESPONSE and the collective (``GLOO_ALLGATHER``, ...) over the same
span, with its bytes, the process group (``process_set``: the group's name in c10d) and the ``phase`` it ran
in (FSDP's unit all-gathers: "forward", or "backward" for the backward pass's prefetches).

A synchronous call is recorded when it returns; an asynchronous one when its future completes (one
callback on the backend's thread). The response id is the k-th call on its group, offset by the group:
every member issues a group's collectives in the same order, so the k-th is the same collective on each.
A call made before the wrappers were installed by ``from torch.distributed import all_reduce`` is not
seen. A DDP communication hook's collectives are recorded once, as its bucket.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from tracer import vocab as V
from tracer.recorder import get_recorder

OPS = {"all_reduce": V.ALLREDUCE, "all_gather_into_tensor": V.ALLGATHER, "all_gather_single": V.ALLGATHER,
       "all_gather": V.ALLGATHER,
       "reduce_scatter_tensor": V.REDUCESCATTER, "reduce_scatter_single": V.REDUCESCATTER,
       "broadcast": V.BROADCAST, "barrier": V.BARRIER}
GROUP_ID = 1 << 32   # response = (group + 1) * GROUP_ID + k: apart from the buckets' ids and each other's

_inside = threading.local()   # a wrapped call under way on this thread (one calls another: record the outer)
_counters: dict[str, Any] = {}
_originals: dict[str, Callable] = {}
phase: Callable[[], str | None] = lambda: None   # noqa: E731  (the watch sets it: the phase now running)


class _Op:
    """What ``rec.ops_done`` reads of an op (tracer/recorder.py: OPS)."""

    __slots__ = ("trace_key", "submit_ns", "stamp")

    def __init__(self, trace_key: tuple, submit_ns: int, stamp: tuple) -> None:
        self.trace_key, self.submit_ns, self.stamp = trace_key, submit_ns, stamp


def install() -> None:
    """Replace the collectives in ``torch.distributed`` (and c10d) by their recording wrappers, once."""
    for name, op in OPS.items():
        if name in _originals or not hasattr(dist, name):
            continue
        original = _originals[name] = getattr(dist, name)
        params = list(inspect.signature(original).parameters)
        wrapper = functools.wraps(original)(functools.partial(_call, original, op, params))
        setattr(dist, name, wrapper)
        if getattr(distributed_c10d, name, None) is original:
            setattr(distributed_c10d, name, wrapper)


def unrecorded(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with the collectives it calls left out (a DDP hook's: its bucket records them)."""
    busy, _inside.busy = getattr(_inside, "busy", False), True
    try:
        return fn(*args, **kwargs)
    finally:
        _inside.busy = busy


def _arg(params: list[str], name: str, args: tuple, kwargs: dict) -> Any:
    """The argument ``name`` of a call, given by keyword or by position (None when left out)."""
    if name in kwargs:
        return kwargs[name]
    i = params.index(name) if name in params else len(args)
    return args[i] if i < len(args) else None


def _call(fn: Callable, op: str, params: list[str], /, *args: Any, **kwargs: Any) -> Any:
    rec = get_recorder()
    if not rec.enabled or getattr(_inside, "busy", False):
        return fn(*args, **kwargs)
    group = _arg(params, "group", args, kwargs)
    group = group if group is not None else distributed_c10d._get_default_group()
    name = str(group.group_name)
    tensor = _first_tensor(op, params, args, kwargs)
    t0, step, what = rec.now(), rec.step, phase()
    _inside.busy = True
    try:
        work = fn(*args, **kwargs)
    finally:
        _inside.busy = False
    seq = next(_counters.setdefault(name, itertools.count()))
    record = functools.partial(_record, rec, op, name, group, tensor, seq, step, what, t0)
    if _arg(params, "async_op", args, kwargs) and work is not None:
        work.get_future().then(lambda f: record(rec.now()))
    else:
        record(rec.now())
    return work


def _first_tensor(op: str, params: list[str], args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The tensor whose bytes a collective is counted in: the input (a gather's shard, a scatter's whole)."""
    if op == V.BARRIER:
        return None
    t = _arg(params, params[1] if op in (V.ALLGATHER, V.REDUCESCATTER) else params[0], args, kwargs)
    return t if isinstance(t, torch.Tensor) else None


def _record(rec: Any, op: str, name: str, group: dist.ProcessGroup, tensor: torch.Tensor | None, seq: int,
            step: int, what: str | None, t0: int, t1: int) -> None:
    gid = int(name) if name.isdigit() else 0
    nbytes = 0 if tensor is None else tensor.numel() * tensor.element_size()
    dtype = "" if tensor is None else str(tensor.dtype).removeprefix("torch.")
    backend = str(dist.get_backend(group)).lower()
    tname = f"{op.lower()}.{name}"
    response = (gid + 1) * GROUP_ID + seq
    size = dist.get_world_size(group)
    key = (tname, op, nbytes, dtype, (0 if tensor is None else tensor.numel(),), None, gid, 0)
    rec.ops_done([_Op(key, t0, (rec, step))], t1, None)
    args = {V.ARG_RESPONSE: response, V.ARG_TENSORS: [tname], V.ARG_COUNT: 1, V.ARG_BYTES: nbytes,
            V.ARG_DTYPE: dtype, V.ARG_OP: op, V.ARG_BACKEND: backend, V.ARG_PROCESS_SET: gid, V.ARG_STEP: step,
            V.ARG_QUEUE_NS: 0}
    if what is not None:
        args[V.ARG_PHASE] = what
    rec.complete(V.TID_FUSION, V.FUSED_RESPONSE, V.CAT_FUSION, t0, t1, args)
    rec.complete(V.TID_BACKEND, f"{backend.upper()}_{op}", V.CAT_COMM, t0, t1, {
        V.ARG_RESPONSE: response, V.ARG_BYTES: nbytes, V.ARG_BACKEND: backend, "size": size,
        V.ARG_PROCESS_SET: gid, V.ARG_STEP: step})
