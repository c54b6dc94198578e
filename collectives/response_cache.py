"""One process set's response cache: negotiated allreduces under bits every member assigns alike.

A plain allreduce (not grouped, no error) that ran through the coordinator is kept under a bit. Every
member runs the same responses in the same order (bit_rounds.py orders them), so a name gets the same
bit on every rank, and the same entry: what every member agreed on (validation.py made them equal).
A name keeps its bit for the life of the cache; once ``capacity`` names have bits, newer names take
the coordinator's path every time. An entry whose request changes is invalidated by the bit rounds
(on every member at the same round) and comes back through the coordinator. The per-tensor work
(the lookup of a submission, the plan of the fused responses) is the native core's
(collectives/core/response_cache.c).
"""
from __future__ import annotations

from dataclasses import dataclass

from collectives import messages as M
from collectives._core import CacheTable
from tracer import vocab as V

HIT, MISS, CHANGED = 0, 1, 2


@dataclass(slots=True, frozen=True)
class Cached:
    """What the members agreed on for one tensor (the response is rebuilt from it)."""
    bit: int
    name: str
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


def cacheable(e) -> bool:
    return e.op_type == V.ALLREDUCE and e.group is None


class ResponseCache(CacheTable):
    """One set's cache: which name has which bit and its record are kept here; the table (C) holds
    each bit's record, the signature a submission must have for it to answer (the entry's op type,
    dtype, shape, reduce op, scale factors, device kind, backend, priority and adapter), the
    entries pending under the bits (``pending``) or held for a stale bit's drop (``stale``), and
    does the lookup (``lookup``, ``collectives._core.route``) and the fused plan (``plan``)."""

    def put(self, resp: M.Response, entries) -> None:
        """Keep what ``resp`` (a cacheable response this member just ran) answered; ``entries``
        are this rank's ops for its names (a rank that joined passes its stand-ins)."""
        for e in entries:
            bit = self.bit_of.get(e.name)
            if bit is None:
                if len(self.bit_of) >= self.capacity:
                    continue
                bit = self.bit_of[e.name] = len(self.bit_of)
            if e.trace_key is not None and e.trace_key[-1] == e.priority:
                key = e.trace_key
            else:
                key = (e.name, e.op_type, e.nbytes, e.dtype, e.shape, e.reduce_op.value,
                       e.process_set, e.priority)
            self.keep(Cached(bit, e.name, e.nbytes, e.shape, e.dtype, resp.reduce_op, resp.prescale,
                             resp.postscale, resp.device, resp.backend, resp.adapter, resp.priority,
                             key), e)
