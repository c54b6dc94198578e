"""Cross-rank stragglers of a Kineto run: for each collective, which rank launched it last, by how much.

A collective is the same on every rank when its ``tensor_ops`` name is (``<op>/pg<group>#<k>``: the
k-th collective of its process group in its ``ProfilerStep``). Launch = when the CPU submitted it
(``record_param_comms``, the backend annotation, or the kernel launch), on the run's common axis,
so after the clock offsets the loader estimated from the collectives (:mod:`viewer.kineto.clock`).
Only the loaded ranks are compared (a run of 128 ranks loaded as 2 compares those 2).
"""
from __future__ import annotations

import pandas as pd

from viewer.analyses import stragglers

COLUMNS = ["tensor", "step", "op", "n_ranks", "last_rank", "spread_ns", "wait_imposed_ns",
           "within_clock_uncertainty"]


def _ranks_loaded(tables) -> int:
    return max(int(tables.ranks["rank"].nunique()), 1)


def collective_launches(tables):
    """One row per collective and rank (stragglers.negotiations over the loaded ranks)."""
    return stragglers.negotiations(tables, size=_ranks_loaded(tables))


def collective_stragglers(tables, launches=None):
    """One row per collective seen on every loaded rank: the last launcher, the spread (last − first
    launch), the wait it imposed (last − second last) and whether that wait is within the clock
    offsets' uncertainty (then the order of the ranks is not certain)."""
    neg = collective_launches(tables) if launches is None else launches
    last = neg[neg["is_last"].astype(bool)]
    if not len(last):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    unc = dict(zip(tables.ranks["rank"].tolist(),
                   tables.ranks["clock_offset_uncertainty_ns"].fillna(0).astype("int64").tolist()))
    worst = max(unc.values(), default=0)
    ops = tables.tensor_ops.drop_duplicates(["tensor", "step"]).set_index(["tensor", "step"])["op"]
    out = last.assign(op=[ops.get((t, s)) for t, s in zip(last["tensor"], last["step"])])
    out["within_clock_uncertainty"] = out["wait_imposed_ns"] <= 2 * worst
    return out.sort_values("wait_imposed_ns", ascending=False, ignore_index=True)[COLUMNS]


def rank_summary(tables, launches=None):
    """Per rank: how often it launched last, the wait it imposed, its median lateness (see
    :func:`viewer.analyses.stragglers.rank_stragglers`), and its clock offset and uncertainty."""
    neg = collective_launches(tables) if launches is None else launches
    out = stragglers.rank_stragglers(neg, size=_ranks_loaded(tables))
    r = tables.ranks.set_index("rank")
    out["clock_offset_ns"] = out["rank"].map(r["clock_offset_ns"]).astype("Int64")
    out["clock_offset_uncertainty_ns"] = out["rank"].map(r["clock_offset_uncertainty_ns"]).astype("Int64")
    return out
