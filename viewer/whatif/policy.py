"""The coordinator's policy, replayed: when ready tensors are planned and how they are fused.

Two paths, as in the runtime:
- the coordinator's (a tensor not in the response cache): it gathers what every rank has submitted
  and sends it once :func:`tracer.fusion_rules.flush_due` says so;
- the response cache's bit rounds: every rank posts a round each cycle, or at once when new work
  arrives; a round decides the cached tensors every rank had submitted when it posted.
Both plan with :func:`tracer.fusion_rules.by_priority` and :func:`tracer.fusion_rules.fuse`, the
runtime's own rules. Times are ns on the run's common axis.
"""
from __future__ import annotations

import heapq
import math

import numpy as np

from tracer.fusion_rules import by_priority, flush_due, fusable, fuse


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
    """[(decision time, batch)] for the tensors ``idx`` (``submit[i]``: {rank: time}). The
    coordinator looks at its requests once per engine tick (``tick_ns``: how often the loaded
    engine thread gets to run, fitted on the run)."""
    if not idx:
        return []
    ready = {i: max(submit[i].values()) for i in idx}
    first = np.array([min(submit[i].values()) for i in idx], dtype=float)
    last = np.array([ready[i] for i in idx], dtype=float)
    origin = float(first.min())
    order = sorted(idx, key=lambda i: ready[i])
    heap = sorted({_up(t, origin, tick_ns) for t in (*last.tolist(), *first.tolist())})
    out: list = []
    pool: list = []
    t_first, k = 0.0, 0
    while heap:
        t = heapq.heappop(heap)
        while k < len(order) and ready[order[k]] <= t:
            if not pool:
                t_first = t
                heapq.heappush(heap, _up(t + cycle_ns, origin, tick_ns))
            pool.append(order[k])
            k += 1
        if not pool:
            continue
        partial = bool(np.any((first <= t) & (last > t)))
        nbytes = sum(tensors[i].nbytes for i in pool)
        if flush_due((t - t_first) / 1e9, cycle_ns / 1e9, nbytes, threshold, partial):
            out += [(t, b) for b in _plan(pool, tensors, threshold, False)]
            pool = []
    return out


def rounds(idx, tensors, submit, threshold, cycle_ns, latency_ns, tick_ns=0.0) -> list[tuple[float, list]]:
    """[(decision time, batch)] for the cached tensors ``idx`` under the bit rounds (a rank posts
    at most once per engine tick)."""
    if not idx:
        return []
    ranks = sorted(submit[idx[0]])
    arrivals = {r: sorted(submit[i][r] for i in idx) for r in ranks}
    post = {r: arrivals[r][0] for r in ranks}
    left = sorted(idx, key=lambda i: max(submit[i].values()))
    out = []
    cycle_ns = max(cycle_ns, 1e3)
    while left:
        p = max(post.values())
        done = p + latency_ns
        picked = [i for i in left if all(submit[i][r] <= post[r] for r in ranks)]
        if picked:
            out += [(done, b) for b in _plan(picked, tensors, threshold, True)]
            gone = set(picked)
            left = [i for i in left if i not in gone]
        for r in ranks:
            nxt = post[r] + cycle_ns
            later = [a for a in arrivals[r] if a > post[r]]
            if later:
                nxt = min(nxt, later[0])
            post[r] = max(done, nxt, post[r] + tick_ns)
    return out
