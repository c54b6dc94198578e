"""The runtime's two planning paths, replayed: the coordinator's (:func:`coordinator`) and the response
cache's bit rounds (:func:`rounds`), both with :mod:`tracer.fusion_rules`. Times: ns, the common axis."""
from __future__ import annotations

import bisect
import heapq
import math

import numpy as np

from tracer.fusion_rules import IDLE_CYCLES, by_priority, flush_due, fusable, fuse


def _key(t, cached: bool):
    if not fusable(t.op):
        return None
    return (t.dtype, t.process_set, t.backend, t.priority) if cached else \
        (t.op, t.dtype, t.process_set, t.backend, t.priority)


def _plan(idx, tensors, threshold, cached):
    """Fused batches (lists of tensor indices) of ``idx`` in readiness order."""
    units = by_priority(idx, lambda i: tensors[i].priority)
    return fuse(units, lambda i: _key(tensors[i], cached), lambda i: tensors[i].nbytes, threshold)


def _up(t: float, origin: float, tick: float) -> float:
    """``t`` rounded up to the engine's next tick after ``origin``."""
    if tick <= 0:
        return t
    return origin + math.ceil((t - origin) / tick - 1e-9) * tick


def coordinator(idx, tensors, submit, threshold, cycle_ns, tick_ns=0.0) -> list[tuple[float, list]]:
    """[(decision time, batch)] for the tensors ``idx``, as the coordinator sends them once ``flush_due``."""
    if not idx:
        return []
    ready = {i: max(submit[i].values()) for i in idx}
    first = sorted(float(min(submit[i].values())) for i in idx)
    last = sorted(float(t) for t in ready.values())
    origin = first[0]
    order = sorted(idx, key=lambda i: ready[i])
    times = np.array([*last, *first])
    if tick_ns > 0:   # _up over all of them at once
        times = origin + np.ceil((times - origin) / tick_ns - 1e-9) * tick_ns
    heap = np.unique(times).tolist()
    out: list = []
    pool: list = []
    t_first, k, nbytes = 0.0, 0, 0
    while heap:
        t = heapq.heappop(heap)
        while k < len(order) and ready[order[k]] <= t:
            if not pool:
                t_first = t
                heapq.heappush(heap, _up(t + cycle_ns, origin, tick_ns))
            pool.append(order[k])
            nbytes += tensors[order[k]].nbytes
            k += 1
        if not pool:
            continue
        # some tensor partly submitted: (first <= t < last) for one, as each first <= its last
        partial = bisect.bisect_right(first, t) > bisect.bisect_right(last, t)
        if flush_due((t - t_first) / 1e9, cycle_ns / 1e9, nbytes, threshold, partial):
            out += [(t, b) for b in _plan(pool, tensors, threshold, False)]
            pool, nbytes = [], 0
    return out


def rounds(idx, tensors, submit, starts, threshold, cycle_ns, round_ns, run) -> None:
    """Replay the bit rounds (collectives.bit_rounds) for the cached tensors ``idx``, through ``run(time, batch)``."""
    if not idx:
        return
    ranks = sorted(submit[idx[0]])
    sub = np.array([[submit[i][r] for r in ranks] for i in idx], dtype=float)   # tensor x rank
    arrivals = [np.sort(sub[:, k]) for k in range(len(ranks))]
    post = np.array([min(starts.get(r, sub[:, k].min()), sub[:, k].min()) for k, r in enumerate(ranks)], dtype=float)
    cycle_ns = max(cycle_ns, 1e3)
    gap = np.full(len(ranks), cycle_ns)      # each rank's gap at its last post
    eager = np.zeros(len(ranks), dtype=bool)  # each rank's last post went at once after a round
    left = np.ones(len(idx), dtype=bool)
    while left.any():
        done = float(post.max()) + round_ns   # the round completes; every rank decodes it
        # a rank on slow (idle) rounds naps gap/4 between checks: it joins the result gap/8 late, expected
        end = done + float(np.where(gap > cycle_ns, gap / 8, 0.0).max())
        seen = (sub <= post).all(axis=1) & left
        idle = not ((sub <= post) & left[:, None]).any()
        if seen.any():
            picked = sorted((idx[j] for j in np.flatnonzero(seen)), key=lambda i: max(submit[i].values()))
            for b in _plan(picked, tensors, threshold, True):
                end = run(end, b)
            left &= ~seen
        for k in range(len(ranks)):
            nxt = post[k] + gap[k]
            j = int(arrivals[k].searchsorted(post[k], "right"))
            woken = j < len(arrivals[k]) and arrivals[k][j] < nxt
            if woken:
                nxt = arrivals[k][j]
            retry = not eager[k] and bool(((sub[:, k] <= end) & left).any())
            if retry:
                nxt = min(nxt, done)
            eager[k] = retry
            post[k] = max(end, nxt)
            decided = min(gap[k] * 2, cycle_ns * IDLE_CYCLES) if idle else cycle_ns
            gap[k] = cycle_ns if woken and nxt > done else decided
