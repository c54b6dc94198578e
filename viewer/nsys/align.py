"""Put one nsys process's times on the run's axis: its UTC, refined by matching NVTX ranges to trace spans."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Pairs whose time difference strays further than this from the chosen shift's median are not
# the same event (e.g. a range recorded only by one side).
_PAIR_TOLERANCE_NS = 200_000
# ... and within the second pass, pairs within this much of the median always stay.
_MIN_KEEP_NS = 20_000
# How far the coarse alignment may be off and still be corrected.
_MAX_COARSE_ERROR_NS = 5_000_000_000


@dataclass
class Alignment:
    """``t_ns = nsys_ns + offset_ns``; ``residual_ns`` = offset_ns - coarse_ns."""

    offset_ns: int
    coarse_ns: int
    residual_ns: int
    spread_ns: int          # median absolute deviation of the matched pairs
    matched: int
    method: str             # "nvtx" | "session-start"
    warning: str | None = None


def _pairs(a: np.ndarray, b: np.ndarray, s: int, limit: int | None = None) -> np.ndarray:
    """Differences b[i+s] - a[i] over every i where both exist (the first ``limit`` of them)."""
    i0 = max(0, -s)
    n = max(0, min(len(a) - i0, len(b) - (i0 + s), len(a) if limit is None else limit))
    return b[i0 + s:i0 + s + n] - a[i0:i0 + n]


def _best_shift(a: np.ndarray, b: np.ndarray, max_err: int, probe: int = 64):
    """The deltas of the best shift pairing sorted nsys starts ``a`` (coarse-shifted) with sorted trace
    starts ``b`` (a[i] with b[i+s]), or None: of the shifts that put a[0] or b[0] within ``max_err`` of a
    partner and pair half the shorter side, the best spread and |median| on the first ``probe`` pairs."""
    if len(a) == 0 or len(b) == 0:
        return None
    lo, hi = np.searchsorted(b, [a[0] - max_err, a[0] + max_err])
    cands = set(range(lo, min(hi + 1, len(b))))
    lo, hi = np.searchsorted(a, [b[0] - max_err, b[0] + max_err])
    cands |= {-i for i in range(lo, min(hi + 1, len(a)))}
    need = max(1, min(len(a), len(b)) // 2)   # a shift must pair at least half the shorter side
    best = None
    for s in cands:
        if min(len(a) - max(0, -s), len(b) - max(0, s)) < need:
            continue
        d = _pairs(a, b, s, probe)
        med = np.median(d)
        key = (np.median(np.abs(d - med)), abs(med), -len(d))
        if best is None or key < best[0]:
            best = (key, s)
    return None if best is None else _pairs(a, b, best[1])


def refine(nsys_ranges, trace_ranges, coarse_ns: int, min_matches: int = 8) -> Alignment:
    """Align by matching NVTX ranges by name; under ``min_matches`` pairs the coarse offset stands, warned."""
    deltas = []
    per_name = []
    t_by_name = {n: np.sort(g["t_ns"].to_numpy(dtype="int64")) for n, g in trace_ranges.groupby("name")}
    for name, g in nsys_ranges.groupby("name"):
        b = t_by_name.get(name)
        if b is None:
            continue
        a = np.sort(g["start"].to_numpy(dtype="int64")) + coarse_ns
        d = _best_shift(a, b, _MAX_COARSE_ERROR_NS)
        if d is not None and len(d):
            per_name.append((float(np.median(d)), len(d)))
            deltas.append(d)
    if deltas:
        # names must agree on one residual: keep those near the count-weighted median of names
        meds = np.repeat([m for m, _ in per_name], [n for _, n in per_name])
        center = np.median(meds)
        alld = np.concatenate(deltas)
        kept = alld[np.abs(alld - center) <= _PAIR_TOLERANCE_NS]
        if len(kept):   # second pass: drop stragglers far outside the pairs' own spread
            med = np.median(kept)
            mad = np.median(np.abs(kept - med))
            kept = kept[np.abs(kept - med) <= max(10 * mad, _MIN_KEEP_NS)]
    else:
        kept = np.array([], dtype="int64")
    if len(kept) < min_matches:
        return Alignment(coarse_ns, coarse_ns, 0, 0, int(len(kept)), "session-start",
                         f"only {len(kept)} NVTX ranges matched the trace (need {min_matches}); "
                         "aligned by session start time only")
    residual = int(round(float(np.median(kept))))
    spread = int(round(float(np.median(np.abs(kept - residual)))))
    return Alignment(coarse_ns + residual, coarse_ns, residual, spread, int(len(kept)), "nvtx")

