"""Horovod's torch collectives (async forms, handles, poll/synchronize) on the ringscope engine.

Each op becomes an engine ``Entry``. A CPU tensor travels as a numpy *view* of its memory
(:mod:`collectives.torch.tensors`); in-place ops hand the engine that same view as the output, so the
result lands in the tensor's storage with no torch-side copy. CUDA tensors (and CPU tensors when
``RINGSCOPE_BACKEND=gloo``) travel as tensors through :class:`collectives.torch.adapter.TorchAdapter`.
Names follow Horovod: ``<op>.<name>``, or ``<op>.noname.<handle>`` without a name.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, cast

import torch

from collectives import api as _api
from collectives import engine as _engine
from collectives import process_sets as _ps
from collectives.adapters import NUMPY
from collectives.entry import Entry
from collectives.ops import Average, Sum
from collectives.torch import tensors as _t
from collectives.torch.adapter import TORCH
from tracer import vocab as V

if TYPE_CHECKING:
    import numpy as np

    from collectives.api import OpArg
    from collectives.handles import Handle as _CoreHandle
    from collectives.process_sets import ProcessSet

T = TypeVar("T")
# what the engine hands back for one tensor: a numpy view (CPU tensors) or a tensor
_Raw: TypeAlias = "np.ndarray | torch.Tensor"


class _AdasumOp:
    def __repr__(self) -> str:
        return "Adasum"


Adasum = _AdasumOp()

_handle_ids = itertools.count()


class Handle(Generic[T]):
    """Returned by the ``*_async`` ops; pass it to :func:`poll` or :func:`synchronize`, which
    returns a ``T``."""

    __slots__ = ("id", "_inner", "_finish", "_keep", "_result", "_done")

    def __init__(self, hid: int, inner: _CoreHandle | list[_CoreHandle] | None,
                 finish: Callable[[Any], T] | None, keep: object, result: T | None = None) -> None:
        """``finish`` makes the op's output from the engine's; None: the output is ``result``
        (an in-place op's tensor, which the engine wrote)."""
        self.id, self._finish, self._keep = hid, finish, keep
        self._inner = inner   # None once finished
        self._result = result
        self._done = False

    def __repr__(self) -> str:
        return f"<collectives.torch handle {self.id}{' done' if self._done else ''}>"

    def __call__(self) -> T:
        """Same as :func:`synchronize` (Horovod's ``sparse_allreduce_async`` hands back a
        callable)."""
        return synchronize(self)


def poll(handle: Handle[Any]) -> bool:
    """True when the op behind ``handle`` has finished (never blocks)."""
    inner = handle._inner
    if inner is None:
        return True
    return all(h.poll() for h in inner) if isinstance(inner, list) else inner.poll()


def synchronize(handle: Handle[T]) -> T:
    """Wait for the op behind ``handle`` and return its output (raises the op's error)."""
    inner = handle._inner
    if inner is not None:
        raw = [h.wait() for h in inner] if isinstance(inner, list) else inner.wait()
        if handle._finish is not None:
            handle._result = handle._finish(raw)
        handle._done, handle._inner, handle._keep = True, None, None
    return handle._result  # type: ignore[return-value]  # a T once done (cast() costs a call)


def resolve_op(op: OpArg | _AdasumOp | None = None, average: bool | None = None) -> OpArg:
    """Horovod's rule: ``op`` wins, the deprecated ``average`` flag maps to Average/Sum."""
    if op is not None and average is not None:
        raise ValueError("set either op or the deprecated average flag, not both")
    if op is None:
        op = Sum if average is False else Average
    if isinstance(op, _AdasumOp):   # Adasum, the one instance
        raise NotImplementedError("op=Adasum is not supported by ringscope's collectives; "
                                  "use op=Average (the default) or op=Sum")
    return op


def pset(process_set: ProcessSet | None) -> ProcessSet:
    """The ProcessSet object for ``process_set=`` (None means the global set)."""
    return _ps.global_process_set if process_set is None else process_set


def is_root(root_rank: int, process_set: ProcessSet | None = None) -> bool:
    """Whether this process is ``root_rank`` (a global rank, as in Horovod) of a broadcast."""
    return _ps.TABLE.get(0).rank == root_rank


def set_root(root_rank: int, process_set: ProcessSet | None = None) -> int:
    """The position within the process set of ``root_rank``, which Horovod gives as a global
    rank; a root outside the set is a ValueError."""
    ranks = _ps.TABLE.get(_ps.set_id_of(process_set)).ranks
    if root_rank not in ranks:
        raise ValueError(f"root_rank {root_rank} is not a member of the process set {ranks}")
    return ranks.index(root_rank)


_noname_counts: dict[Hashable, int] = {}


def _next(key: Hashable) -> int:
    n = _noname_counts.get(key, 0)
    _noname_counts[key] = n + 1
    return n


def _name(prefix: str, name: str | None, process_set: ProcessSet | None = None) -> str:
    """``<prefix>.<name>``; unnamed ops count per (op, process set), so that every member of a set
    derives the same name as long as it issues the same sequence of unnamed ops there."""
    if name is not None:
        return f"{prefix}.{name}"
    sid = _ps.set_id_of(process_set)
    n = _next((prefix, sid))
    return f"{prefix}.noname.{n}" if sid == 0 else f"{prefix}.noname.set{sid}.{n}"


def _use_gloo() -> bool:
    return _engine.get_engine().config.backend == "gloo"


def _entry(op_type: str, name: str, tensor: torch.Tensor, output: torch.Tensor | None = None,
           reduce_op: OpArg = Sum, prescale: float = 1.0, postscale: float = 1.0, root: int = -1,
           splits: list[int] | None = None, process_set: ProcessSet | int | None = None,
           priority: int = 0) -> Entry:
    """An engine entry for ``tensor`` (and in-place ``output``), with the right adapter. (Named
    parameters, not ``**kw``, and a positional ``Entry``: a keyword dict costs µs a tensor.)"""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
    sid = 0 if process_set is None else _ps.set_id_of(process_set)
    if tensor.is_cpu and not _use_gloo():
        arr, view = _t.numpy_of(tensor)
        out = None
        if output is not None:
            if output is not tensor:
                arr_out, view = _t.numpy_of(output)
            out = (arr if output is tensor else arr_out) if view else None
        return Entry(name, op_type, arr, NUMPY, reduce_op, prescale, postscale, root, splits, sid,
                     out, None, priority)
    t = TORCH.check(tensor.detach())
    out_t = output.detach() if output is not None and output.is_contiguous() else None
    return Entry(name, op_type, t if t.is_contiguous() else t.contiguous(), TORCH, reduce_op,
                 prescale, postscale, root, splits, sid, out_t, None, priority)


def _enqueue(entry: Entry) -> _CoreHandle:
    return _engine.get_engine().enqueue(entry)


def _finisher(tensor: torch.Tensor, output: torch.Tensor | None,
              entry: Entry | None = None) -> Callable[[_Raw], torch.Tensor]:
    if output is not None and entry is not None and entry.output is not None:
        return lambda result: output   # the engine wrote the result into output's own memory

    def finish(result: _Raw) -> torch.Tensor:
        if output is not None:
            return _t.copy_into(output, result)
        return _t.from_engine(result, like=tensor)
    return finish


# ---- allreduce ------------------------------------------------------------------------------

def _allreduce_async(tensor: torch.Tensor, output: torch.Tensor | None, name: str | None, op: OpArg,
                     prescale_factor: float, postscale_factor: float, process_set: ProcessSet | None,
                     priority: int = 0) -> Handle[torch.Tensor]:
    hid = next(_handle_ids)
    e = _entry(V.ALLREDUCE, _name("allreduce", name, process_set), tensor, output, op,
               float(prescale_factor), float(postscale_factor), -1, None, process_set, int(priority))
    if output is not None and e.output is not None:   # written in place: no finisher to call
        return Handle(hid, _enqueue(e), None, e, output)
    return Handle(hid, _enqueue(e), _finisher(tensor, output, e), e)


def allreduce_async(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
                    op: OpArg | _AdasumOp | None = None, prescale_factor: float = 1.0,
                    postscale_factor: float = 1.0, process_set: ProcessSet | None = None,
                    priority: int = 0) -> Handle[torch.Tensor]:
    """Start reducing ``tensor`` across ranks (Average by default); the input is not modified."""
    op = resolve_op(op, average)
    return _allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor, process_set,
                            priority)


def allreduce_async_(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
                     op: OpArg | _AdasumOp | None = None, prescale_factor: float = 1.0,
                     postscale_factor: float = 1.0, process_set: ProcessSet | None = None,
                     priority: int = 0) -> Handle[torch.Tensor]:
    """Start reducing ``tensor`` in place; :func:`synchronize` returns ``tensor`` itself."""
    op = resolve_op(op, average)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor, postscale_factor, process_set,
                            priority)


def allreduce_(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
               op: OpArg | _AdasumOp | None = None, prescale_factor: float = 1.0,
               postscale_factor: float = 1.0, process_set: ProcessSet | None = None,
               priority: int = 0) -> torch.Tensor:
    """Reduce ``tensor`` in place across ranks and return it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set, priority))


def _grouped_async(tensors: Iterable[torch.Tensor], outputs: Iterable[torch.Tensor] | None, name: str | None,
                   op: OpArg, prescale_factor: float, postscale_factor: float, process_set: ProcessSet | None,
                   names: Iterable[str] | None = None, priority: int = 0) -> Handle[list[torch.Tensor]]:
    """One negotiated, fused group; ``names`` (optional) names each member ``allreduce.<n>``."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_allreduce needs at least one tensor")
    outs: list[torch.Tensor | None] = [None] * len(tensors) if outputs is None else list(outputs)
    hid = next(_handle_ids)
    base = _name("grouped_allreduce", name, process_set)
    member = [f"allreduce.{n}" for n in names] if names is not None else \
        [f"{base}_{i}" for i in range(len(tensors))]
    entries = [_entry(V.ALLREDUCE, member[i], t, o, reduce_op=op, prescale=float(prescale_factor),
                      postscale=float(postscale_factor), process_set=process_set,
                      priority=int(priority))
               for i, (t, o) in enumerate(zip(tensors, outs))]
    finishers = [_finisher(t, o, e) for t, o, e in zip(tensors, outs, entries)]
    handles = list(_engine.get_engine().enqueue_group(entries, group=base))
    return Handle(hid, handles, lambda rs: [f(r) for f, r in zip(finishers, rs)], entries)


def grouped_allreduce_async(tensors: Iterable[torch.Tensor], average: bool | None = None, name: str | None = None,
                            op: OpArg | _AdasumOp | None = None, prescale_factor: float = 1.0,
                            postscale_factor: float = 1.0, process_set: ProcessSet | None = None,
                            priority: int = 0) -> Handle[list[torch.Tensor]]:
    """Start reducing a list of tensors, negotiated and fused as one group."""
    op = resolve_op(op, average)
    return _grouped_async(tensors, None, name, op, prescale_factor, postscale_factor, process_set,
                          priority=priority)


def grouped_allreduce_async_(tensors: Iterable[torch.Tensor], average: bool | None = None, name: str | None = None,
                             op: OpArg | _AdasumOp | None = None, prescale_factor: float = 1.0,
                             postscale_factor: float = 1.0, process_set: ProcessSet | None = None,
                             priority: int = 0) -> Handle[list[torch.Tensor]]:
    """In-place form of :func:`grouped_allreduce_async`."""
    op = resolve_op(op, average)
    tensors = list(tensors)
    return _grouped_async(tensors, tensors, name, op, prescale_factor, postscale_factor,
                          process_set, priority=priority)


def grouped_allreduce_(tensors: Iterable[torch.Tensor], average: bool | None = None, name: str | None = None,
                       op: OpArg | _AdasumOp | None = None, prescale_factor: float = 1.0,
                       postscale_factor: float = 1.0, process_set: ProcessSet | None = None,
                       priority: int = 0) -> list[torch.Tensor]:
    """Reduce a list of tensors in place as one group and return them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set, priority))


# ---- allgather, broadcast, alltoall, reducescatter -------------------------------------------

def allgather_async(tensor: torch.Tensor, name: str | None = None,
                    process_set: ProcessSet | None = None) -> Handle[torch.Tensor]:
    """Start concatenating every rank's ``tensor`` along dim 0 (first dims may differ)."""
    if tensor.dim() == 0:
        raise ValueError("allgather needs a tensor with at least one dimension")
    hid = next(_handle_ids)
    e = _entry(V.ALLGATHER, _name("allgather", name, process_set), tensor,
               process_set=process_set)
    return Handle(hid, _enqueue(e), _finisher(tensor, None), e)


def _broadcast_async(tensor: torch.Tensor, output: torch.Tensor | None, root_rank: int, name: str | None,
                     process_set: ProcessSet | None) -> Handle[torch.Tensor]:
    root = set_root(int(root_rank), process_set)
    hid = next(_handle_ids)
    e = _entry(V.BROADCAST, _name("broadcast", name, process_set), tensor, output, root=root,
               process_set=process_set)
    return Handle(hid, _enqueue(e), _finisher(tensor, output, e), e)


def broadcast_async(tensor: torch.Tensor, root_rank: int, name: str | None = None,
                    process_set: ProcessSet | None = None) -> Handle[torch.Tensor]:
    """Start sending ``root_rank``'s tensor to every rank of the set; the input is not modified.
    ``root_rank`` is a global rank, as in Horovod, also within a process set."""
    return _broadcast_async(tensor, None, root_rank, name, process_set)


def broadcast_async_(tensor: torch.Tensor, root_rank: int, name: str | None = None,
                     process_set: ProcessSet | None = None) -> Handle[torch.Tensor]:
    """In-place form of :func:`broadcast_async`."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


def broadcast_(tensor: torch.Tensor, root_rank: int, name: str | None = None,
               process_set: ProcessSet | None = None) -> torch.Tensor:
    """Overwrite ``tensor`` with ``root_rank``'s value and return it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def _group_async(op_type: str, prefix: str, tensors: Iterable[torch.Tensor], name: str | None,
                 process_set: ProcessSet | None, **kw: Any) -> Handle[list[torch.Tensor]]:
    """Entries submitted together, one handle; :func:`synchronize` returns the list of outputs.
    (The engine fuses grouped allreduces only: these run one response each.)"""
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"grouped_{prefix} needs at least one tensor")
    if any(t.dim() == 0 for t in tensors):
        raise ValueError(f"grouped_{prefix} needs tensors with at least one dimension")
    hid = next(_handle_ids)
    base = _name(f"grouped_{prefix}", name, process_set)
    entries = [_entry(op_type, f"{base}_{i}", t, process_set=process_set, **kw)
               for i, t in enumerate(tensors)]
    finishers = [_finisher(t, None) for t in tensors]
    handles = list(_engine.get_engine().enqueue_group(entries, group=None))
    return Handle(hid, handles, lambda rs: [f(r) for f, r in zip(finishers, rs)], entries)


def grouped_allgather_async(tensors: Iterable[torch.Tensor], name: str | None = None,
                            process_set: ProcessSet | None = None) -> Handle[list[torch.Tensor]]:
    """Start an allgather of each tensor of a list, submitted together."""
    return _group_async(V.ALLGATHER, "allgather", tensors, name, process_set)


def grouped_reducescatter_async(tensors: Iterable[torch.Tensor], name: str | None = None,
                                op: OpArg | _AdasumOp | None = None, process_set: ProcessSet | None = None,
                                prescale_factor: float = 1.0,
                                postscale_factor: float = 1.0) -> Handle[list[torch.Tensor]]:
    """Start a reducescatter of each tensor of a list, submitted together."""
    op = resolve_op(op)
    return _group_async(V.REDUCESCATTER, "reducescatter", tensors, name, process_set,
                        reduce_op=op, prescale=float(prescale_factor),
                        postscale=float(postscale_factor))


def sparse_allreduce_async(tensor: torch.Tensor, name: str | None, op: OpArg | _AdasumOp | None,
                           process_set: ProcessSet | None = None) -> Handle[torch.Tensor]:
    """Reduce a sparse COO tensor as Horovod does: allgather its indices and values (duplicates
    stay as they are, as in any uncoalesced tensor), dividing the values by the set size for
    Average. The handle's result (``synchronize(h)`` or ``h()``) is the sparse sum."""
    op = resolve_op(op)
    if op not in (Sum, Average):
        raise ValueError("sparse_allreduce_async supports op=Average or op=Sum")
    name = _name("sparse_allreduce", name, process_set)
    sp = tensor.coalesce() if not tensor.is_coalesced() else tensor
    # allgather concatenates dim 0: one row per nonzero, so the indices go transposed
    parts = _group_async(V.ALLGATHER, "allgather", [sp.indices().t().contiguous(), sp.values()],
                         name, process_set)
    n = pset(process_set).size()
    to_parts = cast(Callable[[list[_Raw]], list[torch.Tensor]], parts._finish)   # (a group's)

    def finish(raw: list[_Raw]) -> torch.Tensor:
        indices, values = to_parts(raw)
        if op == Average:
            values = values / n
        return torch.sparse_coo_tensor(indices.t(), values, tensor.shape, check_invariants=True)

    return Handle(parts.id, parts._inner, finish, parts._keep)


def alltoall_async(tensor: torch.Tensor, splits: Sequence[int] | torch.Tensor | None = None, name: str | None = None,
                   process_set: ProcessSet | None = None) -> Handle[tuple[torch.Tensor, torch.Tensor]]:
    """Start an alltoall; :func:`synchronize` returns ``(output, received_splits)``."""
    if tensor.dim() == 0:
        raise ValueError("alltoall needs a tensor with at least one dimension")
    split_list = None if splits is None else [int(s) for s in torch.as_tensor(splits).tolist()]
    hid = next(_handle_ids)
    e = _entry(V.ALLTOALL, _name("alltoall", name, process_set), tensor, splits=split_list,
               process_set=process_set)
    to_tensor = _finisher(tensor, None)

    def finish(result: _Raw) -> tuple[torch.Tensor, torch.Tensor]:
        received = e.meta.get("received_splits", [])
        return to_tensor(result), torch.tensor(received, dtype=torch.int32)

    return Handle(hid, _enqueue(e), finish, e)


def reducescatter_async(tensor: torch.Tensor, name: str | None = None, op: OpArg | _AdasumOp | None = None,
                        process_set: ProcessSet | None = None, prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0) -> Handle[torch.Tensor]:
    """Start reducing ``tensor`` and scattering dim-0 slices of the result, one per rank."""
    op = resolve_op(op)
    if tensor.dim() == 0:
        raise ValueError("reducescatter needs a tensor with at least one dimension")
    hid = next(_handle_ids)
    e = _entry(V.REDUCESCATTER, _name("reducescatter", name, process_set), tensor, reduce_op=op,
               prescale=float(prescale_factor), postscale=float(postscale_factor),
               process_set=process_set)
    return Handle(hid, _enqueue(e), _finisher(tensor, None), e)


def barrier(process_set: ProcessSet | None = None) -> None:
    """Block until every rank of the set reaches the barrier."""
    e = Entry(_name("barrier", None, process_set), V.BARRIER, None, None,
              process_set=_ps.set_id_of(process_set))
    _enqueue(e).wait()


def join(device: int = -1) -> int:
    """Declare that this rank has run out of data: until every rank has joined, it takes part in the
    other ranks' allreduces with zeros (so uneven batches per rank do not deadlock). Returns the last
    rank to join. ``device`` is accepted for Horovod compatibility."""
    return int(_api.join())
