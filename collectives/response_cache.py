"""One process set's response cache: negotiated allreduces under bits every member assigns alike.

A plain allreduce (not grouped, no error) that ran through the coordinator is kept under a bit. Every
member runs the same responses in the same order (bit_rounds.py orders them), so a name gets the same
bit on every rank, and the same entry: what every member agreed on (validation.py made them equal).
A name keeps its bit for the life of the cache; once ``capacity`` names have bits, newer names take
the coordinator's path every time. An entry whose request changes is invalidated by the bit rounds
(on every member at the same round) and comes back through the coordinator.
"""
from __future__ import annotations

from dataclasses import dataclass

from collectives import messages as M
from tracer import vocab as V

HIT, MISS, CHANGED = 0, 1, 2


@dataclass(slots=True, frozen=True)
class Cached:
    """What the members agreed on for one tensor (the response is rebuilt from it)."""
    bit: int
    name: str
    signature: tuple      # signature(entry) of the request it answers
    nbytes: int
    shape: tuple
    dtype: str
    reduce_op: str
    prescale: float
    postscale: float
    device: str
    backend: str
    adapter: str
    priority: int
    trace_key: tuple      # the immutable key handed to the tracer step after step


def signature(e) -> tuple:
    """What must not change for a cached response to answer ``e`` (tracer's trace_key aside).
    Built for every cached submission, so from the entry's fields as they are (the enum member,
    the adapter object: equal exactly when their values are)."""
    return (e.op_type, e.dtype, e.shape, e.reduce_op, e.prescale, e.postscale,
            e.device.partition(":")[0], e.backend, e.priority, e.adapter)


def cacheable(e) -> bool:
    return e.op_type == V.ALLREDUCE and e.group is None


class ResponseCache:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.bit_of: dict[str, int] = {}        # name -> bit, for good
        self.entries: dict[int, Cached] = {}    # bit -> entry, while valid

    def lookup(self, e) -> tuple[int, Cached | None]:
        """(HIT, entry) | (CHANGED, the stale entry) | (MISS, None)."""
        bit = self.bit_of.get(e.name)
        c = None if bit is None else self.entries.get(bit)
        if c is None:
            return MISS, None
        return (HIT, c) if c.signature == signature(e) else (CHANGED, c)

    def put(self, resp: M.Response, entries) -> None:
        """Keep what ``resp`` (a cacheable response this member just ran) answered; ``entries``
        are this rank's ops for its names (a rank that joined passes its stand-ins)."""
        for e in entries:
            bit = self.bit_of.get(e.name)
            if bit is None:
                if len(self.bit_of) >= self.capacity:
                    continue
                bit = self.bit_of[e.name] = len(self.bit_of)
            sig = signature(e)
            if e.trace_key is not None and e.trace_key[-1] == e.priority:
                key = e.trace_key
            else:
                key = (e.name, e.op_type, e.nbytes, e.dtype, e.shape, e.reduce_op.value,
                       e.process_set, e.priority)
            self.entries[bit] = Cached(bit, e.name, sig, e.nbytes, e.shape, e.dtype,
                                       resp.reduce_op, resp.prescale, resp.postscale, resp.device,
                                       resp.backend, resp.adapter, resp.priority, key)

    def invalidate(self, bit: int) -> None:
        self.entries.pop(bit, None)
