"""Fusion planning (coordinator side) and fusion buffers (every rank).

The rules themselves (priority order, greedy fusion, what fuses) live in
:mod:`tracer.fusion_rules`, shared with the viewer's what-if replay. Planning: ready allreduces fuse
when op type, dtype, reduce op, scale factors, process set, device backend and priority all match
and the running byte total stays within the threshold; a non-matching one is skipped over (it gets
a later response). A grouped allreduce is one unit and always one response. Higher priorities are
planned first, so they run ahead of a fused batch of lower ones.
"""
from __future__ import annotations

from collectives import messages as M
from tracer import vocab as V
from tracer.fusion_rules import by_priority, fusable, fuse

__all__ = ["FusionBuffers", "by_priority", "fuse", "plan_responses"]


def _first(item):
    return next(iter(item.requests.values()))


def _key(item):
    req = _first(item)
    return (req.op_type, req.dtype, req.reduce_op, req.prescale, req.postscale, req.process_set,
            req.device, req.backend, req.priority, item.joined)


def _units(items):
    units = []
    for item in items:
        req = _first(item)
        if (req.group and item.error is None and units and units[-1][0].error is None
                and _first(units[-1][0]).group == req.group):
            units[-1].append(item)
        else:
            units.append([item])
    return units


def _unit_bytes(unit):
    return sum(_first(i).nbytes for i in unit)


def _fuse_key(unit):
    item = unit[0]
    if not fusable(_first(item).op_type, item.error):
        return None
    return _key(item)


def _response(new_id, unit):
    req = _first(unit[0])
    resp = M.Response(new_id(), req.op_type, [i.key[1] for i in unit], process_set=req.process_set,
                      dtype=req.dtype, reduce_op=req.reduce_op, prescale=req.prescale,
                      postscale=req.postscale, root=req.root, backend=req.backend,
                      device=req.device, nbytes=_unit_bytes(unit), joined=list(unit[0].joined),
                      adapter=req.adapter, priority=req.priority,
                      cacheable=req.op_type == V.ALLREDUCE and not req.group)
    if req.op_type == V.JOIN:
        resp.root = unit[0].last
    for item in unit:
        if resp.joined:
            resp.shapes[item.key[1]] = tuple(_first(item).shape)
        ordered = [item.requests[r] for r in sorted(item.requests)]
        if req.op_type == V.ALLGATHER:
            resp.first_dims[item.key[1]] = [q.shape[0] for q in ordered]
        elif req.op_type == V.ALLTOALL:
            resp.splits[item.key[1]] = [list(q.splits) for q in ordered]
    return resp


def plan_responses(items, threshold: int, new_id) -> list:
    """Turn ready items (in readiness order) into responses, higher priority first, fusing
    allreduces (a grouped allreduce is one unit: fused only with others of its own key)."""
    units = by_priority(_units(items), lambda u: _first(u[0]).priority)
    out = []
    for batch in fuse(units, _fuse_key, _unit_bytes, threshold):
        item = batch[0][0]
        if item.error is not None:
            out.append(M.Response(new_id(), M.ERROR, [item.key[1]], process_set=item.key[0],
                                  error=item.error))
        else:
            out.append(_response(new_id, [i for unit in batch for i in unit]))
    return out


class FusionBuffers:
    """One growable flat buffer per (adapter, device, dtype), allocated through the adapter."""

    def __init__(self):
        self._bufs = {}

    def get(self, adapter, device: str, dtype: str, numel: int):
        key = (adapter.name, device, dtype)
        buf = self._bufs.get(key)
        if buf is None or _numel(buf) < numel:
            buf = adapter.empty(numel, dtype, device)
            self._bufs[key] = buf
        return adapter.slice(buf, 0, numel)

    def clear(self):
        self._bufs.clear()


def _numel(buf) -> int:
    n = getattr(buf, "size", None)
    if callable(n):       # torch: size() is a method; numel() is the count
        return buf.numel()
    return int(n) if n is not None else len(buf)
