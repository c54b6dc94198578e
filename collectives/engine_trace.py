"""What the engine tells the tracer about each op's lifecycle, in batches.

The user's thread only stamps a submitted op with (recorder, step). The engine writes each op's
lifecycle when it completes, one recorder call per batch; the timeline's writer writes the begins
of ops still in flight at each flush, from the in-flight mapping :func:`track` hands it. With NVTX
the begins go out when the engine picks the ops up (its ranges need the moment). The times their
response arrived and started are passed along for NVTX; the trace has them once, on the response
(FUSED_RESPONSE's start and queue_ns). An op's end always goes to the recorder that stamped it (a
timeline started or stopped in between changes nothing).
"""
from __future__ import annotations

import time
from operator import itemgetter

from collectives import messages as M
from tracer import get_recorder, op_lines
from tracer import recorder as R
from tracer import vocab as V


_op_of, _error_of = itemgetter(0), itemgetter(2)
_now = time.perf_counter_ns   # the recorders' clock

# stamp(): (recorder, step) for the engine to note on ops submitted now (``op.stamp``; the
# time is the op's ``submit_ns``), or None when nothing is recorded. The same tuple serves a whole
# step (no allocation per op); C when built, since it runs once per op on the user's thread.
# ``stamp.last`` is the last stamp given, None when no op in flight can carry a stamp whose
# recorder still writes: completions then skip the tracer (no timeline, or after stop_timeline).
stamp = op_lines.stamper()

# settle(), under the engine's lock, where stamp() runs: once the timeline that stamped last is no
# longer the current one, it was closed when it was replaced, and closed recorders write no ends,
# so stamp.last is forgotten (until the next op is stamped).
settle = stamp.settle


def stamped() -> bool:
    """Whether completions still look for stamped ops (see ``stamp.last``)."""
    return stamp.last is not None


def forget_stamps() -> None:
    """For the bench's unrecorded steps: no op in flight carries a stamp (the caller knows)."""
    stamp.last = None


def track(inflight) -> None:
    """The engine's ops submitted and not finished (name -> op; an op leaves before its end)."""
    R.set_inflight(inflight)


def untrack(inflight) -> None:
    """The engine is closed: its mapping no longer counts (unless another replaced it)."""
    if R.inflight() is inflight:
        R.set_inflight(None)


def _stamp_owner(ops):
    return ops[0].stamp[0]


def begins(entries) -> None:
    """The begins of newly picked-up ops now (for NVTX; the begin is the submission)."""
    others = get_recorder().ops_begin(entries)
    while others:   # stamped under another timeline (started or stopped since)
        others = _stamp_owner(others).ops_begin(others)


def responses(batch, inflight) -> int | None:
    """A batch of responses arrived: returns the time, when their ops' negotiations ended (None
    when nothing is recorded). The engine reads the clock itself unless NVTX needs this."""
    rec = get_recorder()
    if not rec.enabled:
        return None
    if rec.nvtx:
        for resp in batch:
            for name in resp.names:
                e = inflight.get(name)
                if e is not None:
                    rec.tensor_phase(name, V.negotiate_name(e.op_type), V.QUEUE)
    return _now()   # rec.now(), without its frame


def dequeued(rec, entries) -> int:
    """A response starts running: returns the time, when its ops' QUEUE slices end."""
    if rec.nvtx:
        for e in entries:
            rec.tensor_phase(e.name, V.QUEUE)
    return _now()


def ends(done, note=None) -> None:
    """Ops finished, ``done`` = [(entry, result, error)], in the response the recorder's ``note``
    holds open (None: outside any response): the rest of their lifecycles, after the response's
    own lines (its span ends now)."""
    if not done or stamp.last is None:
        return
    rec = get_recorder()
    fast = rec.finish_ops
    if fast is not None:   # one call for the common case (no NVTX, no error)
        done = fast(done, _now(), note)
        if not done:
            return
        t_resp = t_deq = None   # (their ops' NVTX phases only: not on this path)
    else:
        t_resp, t_deq = note.times if note is not None else (None, None)
        if note is not None:
            note.close()
    t = rec.now()
    errors = set(map(_error_of, done))   # loops in C: a response holds up to ~100s of ops
    if len(errors) == 1:
        groups = ((errors.pop(), list(map(_op_of, done))),)
    else:
        by_error: dict = {}
        for e, _, err in done:
            by_error.setdefault(err, []).append(e)
        groups = by_error.items()
    for error, ops in groups:
        others = rec.ops_end(ops, t, error, t_resp, t_deq)
        while others:
            others = _stamp_owner(others).ops_end(others, t, error, t_resp, t_deq)


class ReadyTicks:
    """The coordinator's READY ticks of one pass, noted as the requests arrive and recorded once
    the pass's responses are sent (the other ranks need not wait for the formatting). The engine
    calls :meth:`record` only when ``held`` is not empty: it passes hundreds of times a step."""

    __slots__ = ("held",)

    def __init__(self):
        self.held: list = []

    def note(self, reqs) -> None:
        """Requests that arrived together, now."""
        rec = get_recorder()
        if rec.enabled:
            self.held.append((reqs, rec.now()))

    def record(self) -> None:
        """Record what was noted (a READY line per message of a rank, at its arrival)."""
        held, self.held = self.held, []
        get_recorder().ready_held(held)
