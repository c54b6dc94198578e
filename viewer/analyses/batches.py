"""Whole ranks a batch at a time: analyses whose every figure is per rank hold one batch's intermediates only."""
from __future__ import annotations

import numpy as np


def rank_batches(ranks, limit: int):
    """Row positions of each table by rank (``ranks``: each table's rank column; the first one's rows counted),
    in batches of whole consecutive ranks of about ``limit`` rows of the first table (a bigger rank alone);
    within a rank, rows keep their order."""
    orders = [np.argsort(r, kind="stable") for r in ranks]
    sorted_ranks = [r[o] for r, o in zip(ranks, orders)]
    first = sorted_ranks[0]
    bounds = np.r_[np.flatnonzero(np.r_[True, first[1:] != first[:-1]]), len(first)]   # each rank's rows start
    i = 0
    while i < len(bounds) - 1:
        j = max(i + 1, int(np.searchsorted(bounds, bounds[i] + limit, side="right")) - 1)
        r_lo, r_hi = first[bounds[i]], first[bounds[j] - 1]
        yield [o[np.searchsorted(sr, r_lo, side="left"):np.searchsorted(sr, r_hi, side="right")]
               for o, sr in zip(orders, sorted_ranks)]
        i = j
