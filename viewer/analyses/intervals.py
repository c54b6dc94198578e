"""Interval arithmetic on [start, end) ns pairs, used where overlapping spans must not count twice."""
from __future__ import annotations

import numpy as np


def merge(intervals) -> list[tuple[int, int]]:
    """Sorted, disjoint union of ``(start, end)`` pairs (empty or inverted pairs dropped)."""
    out: list[list[int]] = []
    for s, e in sorted((int(s), int(e)) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals) -> int:
    """Total length of the union."""
    return sum(e - s for s, e in merge(intervals))


def intersection(a, b) -> list[tuple[int, int]]:
    """(union of a) ∩ (union of b) as sorted, disjoint pairs."""
    a, b = merge(a), merge(b)
    i = j = 0
    out = []
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def intersection_length(a, b) -> int:
    """Length of (union of a) ∩ (union of b)."""
    return sum(e - s for s, e in intersection(a, b))


def covered_before(merged, times):
    """For each of ``times``, the length of ``merged`` (:func:`merge`'s output) before it."""
    times = np.asarray(times, dtype="int64")
    if not merged:
        return np.zeros(len(times), dtype="int64")
    s, e = (np.array(x, dtype="int64") for x in zip(*merged))
    cum = np.concatenate([[0], np.cumsum(e - s)])
    k = np.searchsorted(s, times, "right")   # intervals that started by t; only the last may run past it
    past = np.where(k > 0, np.maximum(0, e[np.maximum(k - 1, 0)] - times), 0)
    return cum[k] - past


def union_lengths(groups, starts, ends, n_groups: int):
    """Per group id (0 .. n_groups-1): the length of the union of its ``[start, end)`` pairs."""
    g, s, e = (np.asarray(a, dtype="int64") for a in (groups, starts, ends))
    keep = e > s
    g, s, e = g[keep], s[keep], e[keep]
    out = np.zeros(n_groups, dtype="int64")
    if not len(g):
        return out
    base = np.full(n_groups, np.iinfo("int64").max, dtype="int64")
    np.minimum.at(base, g, s)
    s, e = s - base[g], e - base[g]   # >= 0 within each group
    width = int(e.max()) + 1
    if width * n_groups >= 1 << 62:   # offsets would overflow: walk the groups one by one
        for k in np.unique(g).tolist():
            m = g == k
            out[k] = length(zip(s[m].tolist(), e[m].tolist()))
        return out
    s, e = s + g * width, e + g * width   # groups now lie apart on one axis: one sort orders both
    order = np.argsort(s, kind="stable")
    s, e, g = s[order], e[order], g[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate(([np.iinfo("int64").min], reach[:-1]))
    # float sums of whole ns are exact below 2**53 ns (104 days)
    return np.bincount(g, weights=np.maximum(0, e - np.maximum(s, prev)), minlength=n_groups).astype("int64")
