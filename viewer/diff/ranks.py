"""Ranks of two runs: the late ranks of each, a new straggler, and the ranks' own phases that moved most."""
from __future__ import annotations

import pandas as pd

from viewer import vocab
from viewer.analyses import links

# waiting on the others: a consequence of another rank's lateness, never its cause
_WAITS = ("exposed_comm_ns",)
TOP = 3


def late_ranks(run) -> list[int] | None:
    """The ranks the run flags late (``late_ranks``), None when it cannot tell (no negotiation to compare)."""
    if run.why_not("late_ranks") is not None:
        return None
    return [int(r) for r in run.late_ranks()["rank"]]


def _own_phases(run, steps) -> pd.DataFrame:
    """Per rank: the mean per step of each of its own phases (not its waits), over ``steps``."""
    if run.why_not("breakdown_steps") is not None:
        return pd.DataFrame()
    bd = run.breakdown_steps()
    bd = bd[bd["step"].isin(steps) & bd["other_ns"].notna()]
    cols = [b for b in vocab.BUCKETS if b not in _WAITS]
    return bd.groupby("rank")[cols].mean()


def rank_changes(ra, rb, a_steps, b_steps) -> dict:
    """``a_late``, ``b_late``, ``same``, ``new``, ``gone``; ``movers``: the (rank, phase) of the ranks' own work
    that changed most per step, with the rank's host in B; ``hosts`` (B on two hosts or more): the mean change
    of its ranks' own work per step, per host of B, the most slowed first."""
    a_late, b_late = late_ranks(ra), late_ranks(rb)
    out: dict = {"a_late": a_late, "b_late": b_late, "same": None, "new": [], "gone": [], "movers": [],
                 "hosts": []}
    if a_late is not None and b_late is not None:
        out["same"] = a_late == b_late
        out["new"] = [r for r in b_late if r not in a_late]
        out["gone"] = [r for r in a_late if r not in b_late]
    pa, pb = _own_phases(ra, a_steps), _own_phases(rb, b_steps)
    if not len(pa) or not len(pb):
        return out
    unknown = [c for c in pa.columns if pa[c].isna().all() or pb[c].isna().all()]
    pa, pb = (p.assign(other_ns=p["other_ns"] + p[unknown].fillna(0).sum(axis=1)).drop(columns=unknown)
              for p in (pa, pb))
    ranks = pa.index.intersection(pb.index)
    per = pb.loc[ranks].astype("float64") - pa.loc[ranks].astype("float64")
    delta = per.stack().dropna().sort_values(key=abs, ascending=False).head(TOP)
    host = links.hosts_of(rb.ranks)
    own = per.sum(axis=1)   # each rank's own work per step, B less A
    if len(set(host.values())) >= 2:
        by_host = own.groupby([host.get(int(r)) for r in own.index]).mean()
        out["hosts"] = [{"host": h, "ranks": [int(r) for r in own.index if host.get(int(r)) == h],
                         "delta_ms": float(m) / 1e6}
                        for h, m in by_host.sort_values(ascending=False).items()]
    for (rank, bucket), d in delta.items():
        out["movers"].append({"rank": int(rank), "host": host.get(int(rank)), "phase": vocab.BY_BUCKET[bucket].label,
                              "a_ms": float(pa.loc[rank, bucket]) / 1e6, "b_ms": float(pb.loc[rank, bucket]) / 1e6,
                              "delta_ms": float(d) / 1e6})
    return out
