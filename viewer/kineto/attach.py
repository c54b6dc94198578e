"""A Kineto trace beside our own trace of the same rank: its events join that rank's, on one axis (docs/KINETO.md)."""
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
    """``parsed`` with each Kineto file's events moved into our trace of its rank, when there is one; every file's
    meta holds every Kineto rank's thread names (the run's meta is one file's)."""
    names = {r: n for p in parsed for r, n in p["meta"].get("thread_names", {}).items()}
    for p in parsed:
        p["meta"]["thread_names"] = names
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
        ev["launch_ns"] += shift
        merged = pd.concat([host["events"], ev], ignore_index=True)
        host["events"] = frames.conform("events", merged.sort_values("t_ns", kind="stable", ignore_index=True))
        last = ri.get("last_ts_ns")
        if last is not None and host["rank_info"].get("last_ts_ns") is not None:
            host["rank_info"]["last_ts_ns"] = max(host["rank_info"]["last_ts_ns"], last + shift)
        host["meta"]["kineto_alignment"] = alignment   # every rank's, whichever rank's meta is read
    return out


def refine(ours, theirs, wall_ns: int) -> dict:
    """``{refined_ns, uncertainty_ns, spans}`` that makes both optimizer steps nest (else None and ``why``)."""
    o = ours[ours["name"] == V.OPTIMIZER_STEP]
    k = theirs[theirs["name"].str.startswith(THEIRS) & theirs["thread"].str.startswith("cpu:")]
    if not len(o) or not len(k):
        return _unrefined(0, f"no {V.OPTIMIZER_STEP} span in our trace and {THEIRS}* span in Kineto's to match")
    os_, od = o["t_ns"].to_numpy("int64"), o["dur_ns"].to_numpy("int64")
    order = np.argsort(k["t_ns"].to_numpy("int64"), kind="stable")
    ks, kd = k["t_ns"].to_numpy("int64")[order] + wall_ns, k["dur_ns"].to_numpy("int64")[order]
    coarse = _coarse(os_, od, ks, kd)
    if coarse is None:
        return _unrefined(0, "no optimizer step of ours lasts as long as one of Kineto's")
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
        why = f"the matched spans contradict each other by {low - high} ns (the wall clock stands)"
        return _unrefined(len(lo), why)
    return {"refined_ns": coarse + (low + high) // 2, "uncertainty_ns": (high - low + 1) // 2, "spans": len(lo)}


def _unrefined(spans: int, why: str) -> dict:
    return {"refined_ns": None, "uncertainty_ns": None, "spans": spans, "why": why}


def _coarse(os_, od, ks, kd) -> int | None:
    """The shift (ns) that lines most of our optimizer steps up with Kineto's hook spans around them (a
    little longer: up to ``_SLACK_NS`` + 1 %), where their start differences gather; of equal gatherings,
    the one nearest the wall clock. None when no pair qualifies."""
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
