"""Interval arithmetic on [start, end) ns pairs, used where overlapping spans must not count twice."""
from __future__ import annotations


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


def intersection_length(a, b) -> int:
    """Length of (union of a) ∩ (union of b)."""
    a, b = merge(a), merge(b)
    i = j = total = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def grouped(keys, starts, ends) -> dict:
    """``{key: [(start, end), ...]}`` from parallel sequences (plain lists: cheap to build and walk)."""
    out: dict = {}
    for k, s, e in zip(keys, starts, ends):
        out.setdefault(k, []).append((s, e))
    return out
