"""The response cache's table in C (collectives/core/response_cache.c): the lookup of submissions
under their bits and the plan of the fused responses of ready bits, on one rank, no MPI."""
import numpy as np

from collectives import messages as M
from collectives._core import route
from collectives.adapters import NUMPY
from collectives.config import Config
from collectives.entry import Entry
from collectives.response_cache import CHANGED, HIT, MISS, ResponseCache
from collectives.submit import prepare
from tracer import vocab as V


class _Sets:
    class _Set:
        rank, size, ranks = 0, 1, [0]

    def get(self, set_id):
        return self._Set()


def _entry(name, numel=4, priority=0, dtype=np.float32):
    e = Entry(name, V.ALLREDUCE, np.zeros(numel, dtype), NUMPY, priority=priority)
    prepare(e, Config(), _Sets(), 0)
    return e


def _cache(entries, capacity=8):
    c = ResponseCache(capacity)
    for e in entries:
        c.put(M.Response(0, V.ALLREDUCE, [e.name], dtype=e.dtype, priority=e.priority, cacheable=True), [e])
    return c


def test_route_puts_hits_under_their_bits_and_holds_changed_ones():
    a, b, new = _entry("a"), _entry("b"), _entry("new")
    c = _cache([a, b])
    a2, b2 = _entry("a"), _entry("b", numel=8)   # b's shape changed
    assert c.lookup(a2)[0] == HIT and c.lookup(b2)[0] == CHANGED and c.lookup(new) == (MISS, None)
    assert route([a2, b2, new], {0: c}) == [new]
    assert c.pending == {0: a2} and c.stale == {1: [b2]}
    assert a2.trace_key is c.entries[0].trace_key
    c.invalidate(1)
    assert c.lookup(b2) == (MISS, None) and 1 not in c.entries


def test_plan_orders_by_priority_fuses_within_the_threshold_and_takes_the_pending():
    es = [_entry("lo0"), _entry("hi", priority=3), _entry("lo1"), _entry("big", numel=64),
          _entry("d", dtype=np.float64)]
    c = _cache(es)
    mine = [_entry(e.name, numel=e.shape[0], priority=e.priority, dtype=np.dtype(e.dtype)) for e in es[:4]]
    assert route(mine, {0: c}) == []
    out = c.plan([0, 1, 2, 3, 4], 64)   # 16 + 16 bytes fit in 64, "big" (256) does not
    assert [names for _, names, _, _, _ in out] == [["hi"], ["lo0", "lo1"], ["big"], ["d"]]
    assert [nbytes for *_, nbytes, _ in out] == [16, 32, 256, 32]
    assert out[1][2] == [mine[0], mine[2]] and out[3][2] == [None] and out[3][4] is True
    assert c.pending == {}
