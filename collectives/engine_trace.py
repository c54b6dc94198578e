"""What the engine tells the tracer about each op's lifecycle, in batches.

The user's thread only stamps a submitted op with (recorder, time, step); the engine thread writes the
begin lines when it picks the ops up, keeps the response and dequeue times on the entry, and writes
the rest of each lifecycle when the op completes, one recorder call per batch. An op's end always goes
to the recorder that has its begin (a timeline started or stopped in between changes nothing).
"""
from __future__ import annotations

from collectives import messages as M
from tracer import get_recorder
from tracer import vocab as V


def submitted(entries) -> None:
    """On the user's thread: note when and under which recorder each op was submitted."""
    rec = get_recorder()
    if not rec.enabled:
        return
    stamp = (rec, rec.now(), rec.step)
    for e in entries:
        if e.op_type not in M.CONTROL_OPS:
            e.meta["submitted"] = stamp


def _per_recorder(pairs, item):
    """[(recorder, [item(entry, stamp, x)])] for the stamped entries of ``pairs`` = [(entry, x)],
    grouped by the recorder that has their begin."""
    groups, rec, items = [], None, None
    for e, x in pairs:
        stamp = e.meta.get("submitted")
        if stamp is None:
            continue
        if stamp[0] is not rec:
            rec, items = stamp[0], []
            groups.append((rec, items))
        items.append(item(e, stamp, x))
    return groups


def _begin(e, stamp, _):
    return (e.name, V.negotiate_name(e.op_type), stamp[1], stamp[2],
            (e.op_type, e.nbytes, e.dtype, tuple(e.shape), e.reduce_op.value, e.process_set))


def _end(e, stamp, error):
    meta = e.meta
    return (e.name, V.negotiate_name(e.op_type), meta.get("t_response"), meta.get("t_dequeue"),
            stamp[0].now(), error)


def begins(entries) -> None:
    """The outer slice and the negotiation of newly picked-up ops (the begin is the submission)."""
    for rec, items in _per_recorder([(e, None) for e in entries], _begin):
        rec.tensors_begin(items)


def responses(batch, inflight) -> None:
    """A batch of responses arrived: each named op's negotiation ended now."""
    rec = get_recorder()
    if not rec.enabled:
        return
    now = rec.now()
    for resp in batch:
        for name in resp.names:
            e = inflight.get(name)
            if e is not None and "t_response" not in e.meta:
                e.meta["t_response"] = now
                if rec.nvtx:
                    rec.tensor_phase(name, V.negotiate_name(e.op_type), V.QUEUE)


def dequeued(rec, entries) -> None:
    """A response starts running: its ops' QUEUE slices end now."""
    now = rec.now()
    for e in entries:
        e.meta["t_dequeue"] = now
    if rec.nvtx:
        for e in entries:
            rec.tensor_phase(e.name, V.QUEUE)


def ends(done) -> None:
    """Ops finished, ``done`` = [(entry, result, error)]: the rest of their lifecycles."""
    for rec, items in _per_recorder([(e, error) for e, _, error in done], _end):
        rec.tensors_end(items)


def ready(reqs) -> None:
    """The coordinator's READY ticks for one batch of requests (they arrived together)."""
    rec = get_recorder()
    if rec.enabled:
        rec.ready_many([(r.name, r.rank, r.process_set) for r in reqs])
