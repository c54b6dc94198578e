"""Negotiation group: the coordination logic at 64-1024 synthetic ranks, without launching them.

Full path: every rank's requests for a cycle are pickled as the engine sends them; rank 0 unpickles
them, adds them to the real :class:`Coordinator` and plans the responses. Cached path: the tensors
are in the response cache; rank 0 does what every rank does each round with the real
:class:`BitRounds`: build its words, decode the AND-reduced result and derive the fused responses.
The reduction itself is MPI's (log2(ranks) steps of the same few hundred bytes on each rank); it is
simulated here only to feed the decode and is reported on its own, not as rank 0's work.
"""
from __future__ import annotations

import pickle
import time

import numpy as np

RANKS = (64, 256, 1024)
TENSORS = 200


class _Set:
    def __init__(self, size):
        self.ranks = list(range(size))
        self.rank = 0
        self.size = size


class _Sets:
    """The process-set table for rank 0 of a job of ``size`` ranks (one global set)."""

    def __init__(self, size):
        self._set = _Set(size)

    def get(self, set_id):
        return self._set

    def ids(self):
        return [0]


def _entries(count, nbytes=16 * 1024):
    from collectives.adapters import NUMPY
    from collectives.config import Config
    from collectives.entry import Entry
    from collectives.ops import Sum
    from collectives.submit import prepare
    from tracer import vocab as V
    cfg, sets = Config(), _Sets(1)
    out = []
    for i in range(count):
        e = Entry(f"grad.{i}", V.ALLREDUCE, np.zeros(nbytes // 4, np.float32), NUMPY, reduce_op=Sum)
        prepare(e, cfg, sets, 0)
        out.append(e)
    return out


def full_cycle(size: int, entries) -> tuple[float, int]:
    """Seconds rank 0 spends on one cycle of the full path (every rank submits every tensor), and
    the number of responses planned."""
    from collectives.config import Config
    from collectives.coordinator import Coordinator
    from collectives.submit import request_of
    coord = Coordinator(Config(), _Sets(size))
    msgs = [pickle.dumps((r, [request_of(e, r) for e in entries]), protocol=5)
            for r in range(size)]
    t0 = time.perf_counter()
    now = time.monotonic()
    for m in msgs:
        _, reqs = pickle.loads(m)
        for q in reqs:
            coord.add(q, now)
    plan = coord.plan(now)
    for resp, _members in plan:   # the responses go to every member: one message each
        pickle.dumps([resp], protocol=5)
    dt = time.perf_counter() - t0
    return dt, len(plan)


def _rounds(size, entries):
    """Rank 0's BitRounds with ``entries`` cached (as after the first step)."""
    from collectives import messages as M
    from collectives.bit_rounds import BitRounds
    from collectives.config import Config
    cfg = Config()
    rounds = BitRounds(None, _Sets(size), cfg)
    resp = M.Response(0, entries[0].op_type, [e.name for e in entries], cacheable=True)
    rounds.cache(0).put(resp, entries)
    return rounds


def cached_cycle(size: int, entries) -> tuple[float, float, int]:
    """(seconds of rank 0's own work in one round, seconds of the simulated AND across ``size``
    ranks, responses derived)."""
    rounds = _rounds(size, entries)
    cache = rounds.caches[0]
    pend = rounds.pending[0]
    t0 = time.perf_counter()
    for e in entries:
        _, c = cache.lookup(e)
        pend[c.bit] = e
    mine = rounds.vector()
    t1 = time.perf_counter()
    others = np.repeat(mine[None, :], size, axis=0)   # every rank submitted every tensor
    reduced = np.bitwise_and.reduce(others, axis=0)
    t2 = time.perf_counter()
    res = rounds.decode(reduced)
    out = rounds.responses(0, res.ready[0], cfg_threshold(), 0)
    t3 = time.perf_counter()
    return (t1 - t0) + (t3 - t2), t2 - t1, len(out)


def cfg_threshold() -> int:
    from collectives.config import Config
    return Config().fusion_threshold


def _range(seconds) -> str:
    xs = sorted(seconds)
    return f"{xs[0] * 1e3:.3g}-{xs[-1] * 1e3:.3g}"


def _best(fn, reps):
    runs = [fn() for _ in range(reps)]
    return min(runs, key=lambda r: r[0]), runs


def measure(ranks=RANKS, tensors=TENSORS, reps=3, tensor_counts=(), full_reps=1) -> dict:
    """Rows of rank 0's per-cycle cost, full and cached, by ranks (and by tensors at the largest
    rank count for ``tensor_counts``)."""
    rows = []
    cases = [(n, tensors) for n in ranks] + [(ranks[-1], t) for t in tensor_counts
                                             if t != tensors]
    cached_cycle(ranks[0], _entries(tensors))   # warm-up (first calls, allocations)
    for n, t in cases:
        entries = _entries(t)
        (full_s, nresp), full_runs = _best(lambda n=n, e=entries: full_cycle(n, e), full_reps)
        (cached_s, and_s, ncached), cached_runs = _best(lambda n=n, e=entries: cached_cycle(n, e),
                                                        reps)
        rows.append({"ranks": n, "tensors": t, "full_ms": full_s * 1e3,
                     "full_us_per_rank_tensor": full_s * 1e6 / (n * t),
                     "cached_rank0_ms": cached_s * 1e3, "simulated_and_ms": and_s * 1e3,
                     "responses_full": nresp, "responses_cached": ncached,
                     "full_ms_range": _range(r[0] for r in full_runs),
                     "cached_ms_range": _range(r[0] for r in cached_runs)})
    return {"rows": rows}


def run(quick: bool) -> dict:
    res = measure(reps=5, full_reps=1 if quick else 3, tensor_counts=() if quick else (50, 800))
    rows = res["rows"]
    by_ranks = {r["ranks"]: r for r in rows if r["tensors"] == TENSORS}
    lo, hi = by_ranks[RANKS[0]], by_ranks[RANKS[-1]]
    metrics = {
        "negotiation.cached_rank0_growth_64_to_1024": {
            "value": hi["cached_rank0_ms"] / lo["cached_rank0_ms"],
            "detail": f"rank 0's cached-path cycle {lo['cached_rank0_ms']:.3f} ms at {RANKS[0]} "
                      f"ranks, {hi['cached_rank0_ms']:.3f} ms at {RANKS[-1]} ({TENSORS} tensors)"},
        "negotiation.full_vs_cached_at_1024": {
            "value": hi["full_ms"] / hi["cached_rank0_ms"],
            "detail": f"full path {hi['full_ms']:.1f} ms vs cached {hi['cached_rank0_ms']:.3f} ms "
                      f"per cycle at {RANKS[-1]} ranks x {TENSORS} tensors"},
    }
    notes = [("simulated_and_ms: numpy's AND over every rank's words here, i.e. the reduction MPI "
              "spreads over log2(ranks) steps on all ranks; not rank 0's work")]
    return {"rows": rows, "metrics": metrics, "notes": notes,
            "columns": ["ranks", "tensors", "full_ms", "full_us_per_rank_tensor",
                        "cached_rank0_ms", "simulated_and_ms", "responses_full",
                        "responses_cached"]}
