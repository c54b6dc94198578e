"""What the engine tells the tracer, through the recorder contract (tracer/recorder.py).

The user's thread stamps submitted ops with (recorder, step) (:func:`stamp`, once per admitted
batch). The engine hands the finished ops to the recorder that stamped them (:func:`ends`), and
its mapping of ops in flight to the tracer (:func:`track`), whose writer writes the B lines of
those still open at each flush. READY instants are noted as requests arrive and recorded once the
pass's responses are sent (:class:`ReadyTicks`).
"""
from __future__ import annotations

import time

from tracer import get_recorder
from tracer import recorder as R
from tracer import vocab as V

_now = time.perf_counter_ns   # the recorders' clock
_last = None   # the recorder that stamped last, while ops it stamped may still be in flight


def stamp():
    """(recorder, step) for ops submitted now (``op.stamp``), or None when nothing records."""
    global _last
    rec = get_recorder()
    if not rec.enabled:
        return None
    _last = rec
    return (rec, rec.step)


def settle() -> None:
    """Under the engine's lock, where :func:`stamp` runs: once the recorder that stamped last is no
    longer the current one, it was closed when replaced, and a closed recorder writes no ends, so
    completions stop looking for stamps (until the next op is stamped)."""
    global _last
    if _last is not None and _last is not get_recorder():
        _last = None


def stamped() -> bool:
    """Whether completions still look for stamped ops."""
    return _last is not None


def track(inflight) -> None:
    """The engine's ops submitted and not finished (name -> op; an op leaves before its end)."""
    R.set_inflight(inflight)


def untrack(inflight) -> None:
    """The engine is closed: its mapping no longer counts (unless another replaced it)."""
    if R.inflight() is inflight:
        R.set_inflight(None)


def ends(done) -> None:
    """Ops finished, ``done`` = [(entry, result, error)]: their lifecycles, each to the recorder
    that stamped it."""
    if not done or _last is None:
        return
    t = _now()
    errors = {d[2] for d in done}
    if len(errors) == 1:
        groups = ((errors.pop(), [d[0] for d in done]),)
    else:
        by_error: dict = {}
        for e, _, err in done:
            by_error.setdefault(err, []).append(e)
        groups = by_error.items()
    for error, ops in groups:
        others = get_recorder().ops_done(ops, t, error)
        while others:   # stamped under another timeline (started or stopped since)
            others = others[0].stamp[0].ops_done(others, t, error)


_written = [None, None, None]   # the recorder and queue counters last written


def queue_counters(rec, depth: int, nbytes: int) -> None:
    """Queue depth and bytes in flight as counters, when they changed since last written."""
    if _written[0] is rec and _written[1] == depth and _written[2] == nbytes:
        return
    _written[:] = rec, depth, nbytes
    t = _now()
    rec.counter(V.COUNTER_QUEUE_DEPTH, depth, t)
    rec.counter(V.COUNTER_BYTES_IN_FLIGHT, nbytes, t)


class ReadyTicks:
    """The coordinator's READY instants of one pass, noted as the requests arrive and recorded
    once the pass's responses are sent (the other ranks need not wait for them). The engine
    calls :meth:`record` only when ``held`` is not empty: it passes hundreds of times a step."""

    __slots__ = ("held",)

    def __init__(self):
        self.held: list = []

    def note(self, reqs) -> None:
        """Requests that arrived together, now."""
        rec = get_recorder()
        if rec.enabled:
            self.held.append((reqs, _now()))

    def record(self) -> None:
        """One READY per run of requests from one rank and process set (a message), at its
        arrival, listing its tensors."""
        held, self.held = self.held, []
        rec = get_recorder()
        for reqs, t in held:
            key, names = None, []
            for r in reqs:
                k = (r.rank, r.process_set)
                if k != key:
                    if names:
                        rec.ready(names, key[0], key[1], t)
                    key, names = k, []
                names.append(r.name)
            if names:
                rec.ready(names, key[0], key[1], t)
