"""What the engine tells the tracer, through the recorder contract (tracer/recorder.py).

The native core stamps submitted ops with (recorder, step) at admission and hands the finished ops
to the recorder that stamped them (collectives/core/submit_queue.c, through the recorder's C API).
The engine hands its mapping of ops in flight to the tracer (:func:`track`), whose writer writes
the B lines of those still open at each flush. READY instants are noted as requests arrive and
recorded once the pass's responses are sent (:class:`ReadyTicks`).
"""
from __future__ import annotations

import time

from collectives._core import stamped as _stamped
from tracer import get_recorder
from tracer import recorder as R
from tracer import vocab as V

_now = time.perf_counter_ns   # the recorders' clock


def stamped() -> bool:
    """Whether completions still look for stamped ops (the core stamps at admission and records
    the ends at completion: collectives/core/submit_queue.c)."""
    return _stamped()


def track(inflight) -> None:
    """The engine's ops submitted and not finished (name -> op; an op leaves before its end)."""
    R.set_inflight(inflight)


def untrack(inflight) -> None:
    """The engine is closed: its mapping no longer counts (unless another replaced it)."""
    if R.inflight() is inflight:
        R.set_inflight(None)


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
