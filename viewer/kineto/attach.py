"""A Kineto trace beside our own trace of the same rank: its events join that rank's, on one axis.

Both are the rank's wall clock: ours is ``base_epoch_ns`` + local ns, Kineto's
``baseTimeNanoseconds`` + ts (``base_epoch_ns`` of its file). So the Kineto events move first by the
difference of the two bases into our file's local time. Two reads of a wall clock still differ (each
tracer reads it once, then counts on its own clock), so the alignment is then refined on the spans
both recorded: ``DistributedOptimizer.step()`` is our OPTIMIZER_STEP span and, inside torch's
optimizer hook, Kineto's ``Optimizer.step#<class>.step`` annotation around it, with the wrapped
optimizer's own ``Optimizer.step#...`` inside it. Nested spans bound the residual offset (the outer
one starts before and ends after the inner one), the bounds of every pair are intersected, and the
midpoint is applied; the window's half-width is its uncertainty. When no pair exists or the bounds
contradict each other, the wall clock stands. ``meta["kineto_alignment"]``: one entry per Kineto file
joined (rank, file, wall_clock_shift_ns, refined_ns, uncertainty_ns, spans, or why not refined).
Its collectives are not added (ours describe them); its CPU threads and GPU streams become lanes of
that rank beside ours.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer import frames
from viewer.errors import TraceError

THEIRS = "Optimizer.step#"   # torch.optim's record_function around every optimizer's step()
_SLACK_NS = 200_000        # torch's hook around our step adds microseconds; steps differ by far more
_GATHER_NS = 100_000       # start differences of the right pairs lie this close together
_MAX_PAIRS, _NEAR_NS = 4_000_000, 10_000_000_000


def attach(parsed: list[dict]) -> list[dict]:
    """``parsed`` without the Kineto files that have our trace of the same rank, their events moved
    into that trace's ``events`` (``meta["kineto_files"]`` lists them)."""
    ours = {p["rank_info"]["rank"]: p for p in parsed
            if p["rank_info"].get("format") != "kineto" and p["meta"].get("part") in (None, 0)}
    out, alignment = [], []
    for p in parsed:
        ri = p["rank_info"]
        host = ours.get(ri["rank"]) if ri.get("format") == "kineto" else None
        if host is None:
            out.append(p)
            continue
        base_k, base_o = ri.get("base_epoch_ns"), host["rank_info"].get("base_epoch_ns")
        if base_k is None or base_o is None:
            other = host["rank_info"]["file"]
            raise TraceError(ri["file"], f"cannot share rank {ri['rank']}'s time axis with {other}: "
                                         "one of them records no wall-clock time")
        ev = p["events"]
        wall = int(base_k) - int(base_o)
        refined = refine(host["events"], ev, wall)
        shift = wall + (refined["refined_ns"] or 0)
        alignment.append({"rank": ri["rank"], "file": ri["file"], "wall_clock_shift_ns": wall, **refined})
        ev["t_ns"] += shift
        if "launch_ns" in ev:
            ev["launch_ns"] += shift
        merged = pd.concat([host["events"], ev], ignore_index=True)
        host["events"] = frames.conform("events", merged.sort_values("t_ns", kind="stable", ignore_index=True))
        last = ri.get("last_ts_ns")
        if last is not None and host["rank_info"].get("last_ts_ns") is not None:
            host["rank_info"]["last_ts_ns"] = max(host["rank_info"]["last_ts_ns"], last + shift)
        host["meta"].setdefault("kineto_files", []).append(ri["file"])
        host["meta"]["kineto_alignment"] = alignment   # every rank's, whichever rank's meta is read
    return out


def refine(ours, theirs, wall_ns: int) -> dict:
    """``{refined_ns, uncertainty_ns, spans}``: what to add to ``wall_ns`` (Kineto local ns to ours)
    so that the optimizer steps both recorded nest; ``refined_ns`` None (and ``why``) when it cannot
    be told."""
    o = ours[ours["name"] == V.OPTIMIZER_STEP]
    k = theirs[theirs["name"].str.startswith(THEIRS) & theirs["thread"].str.startswith("cpu:")]
    if not len(o) or not len(k):
        return {"refined_ns": None, "uncertainty_ns": None, "spans": 0,
                "why": f"no {V.OPTIMIZER_STEP} span in our trace and {THEIRS}* span in Kineto's to match"}
    os_, od = o["t_ns"].to_numpy("int64"), o["dur_ns"].to_numpy("int64")
    order = np.argsort(k["t_ns"].to_numpy("int64"), kind="stable")
    ks, kd = k["t_ns"].to_numpy("int64")[order] + wall_ns, k["dur_ns"].to_numpy("int64")[order]
    coarse = _coarse(os_, od, ks, kd)
    if coarse is None:
        return {"refined_ns": None, "uncertainty_ns": None, "spans": 0,
                "why": "no optimizer step of ours lasts as long as one of Kineto's"}
    ks = ks + coarse
    ke = ks + kd
    longest = int(kd.max())
    lo, hi = [], []
    for a, b in zip(os_, os_ + od):   # the Kineto spans overlapping each of ours, once lined up
        for j in range(np.searchsorted(ks, a - longest), np.searchsorted(ks, b)):
            if ke[j] <= a or kd[j] == b - a:
                continue
            outer = kd[j] > b - a   # theirs around ours (torch's hook), else ours around theirs
            lo.append(b - ke[j] if outer else a - ks[j])
            hi.append(a - ks[j] if outer else b - ke[j])
    low, high = int(max(lo)), int(min(hi))
    if low > high:
        return {"refined_ns": None, "uncertainty_ns": None, "spans": len(lo),
                "why": f"the matched spans contradict each other by {low - high} ns (the wall clock stands)"}
    return {"refined_ns": coarse + (low + high) // 2, "uncertainty_ns": (high - low + 1) // 2, "spans": len(lo)}


def _coarse(os_, od, ks, kd) -> int | None:
    """The shift (ns) that lines most of our optimizer steps up with Kineto's hook spans around them:
    a hook span starts just before ours and lasts a little longer (up to ``_SLACK_NS`` + 1 %), so the
    start differences of such pairs gather in one place; of equal gatherings, the one nearest the wall
    clock wins. None when no pair qualifies."""
    if len(os_) * len(ks) > _MAX_PAIRS:   # keep our steps near the Kineto window
        near = (os_ > ks.min() - _NEAR_NS) & (os_ < ks.max() + _NEAR_NS)
        os_, od = os_[near], od[near]
    longer = kd[None, :] - od[:, None]
    i, j = np.nonzero((longer >= 0) & (longer <= _SLACK_NS + od[:, None] // 100))
    if not len(i):
        return None
    diffs = np.sort(os_[i] - ks[j])
    counts = np.searchsorted(diffs, diffs + _GATHER_NS, side="right") - np.arange(len(diffs))
    best = np.flatnonzero(counts == counts.max())
    k = best[np.argmin(np.abs(diffs[best] + _GATHER_NS // 2))]
    return int(np.median(diffs[k:k + counts[k]]))
