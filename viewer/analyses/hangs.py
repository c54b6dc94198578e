"""Hangs: tensors some ranks never submitted or never completed, and whose trace stopped first."""
from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ["tensor", "step", "occurrence", "kind", "submitted_ranks", "missing_ranks", "unfinished_ranks",
           "first_submit_ns", "waited_ns", "failed"]
# a kill loses at most one flush period (0.5 s): traces stopping within this were cut together
STOP_GAP_NS = 1_000_000_000


def rank_ends(tables):
    """``rank, last_ns, closed`` per loaded rank (an elastic run's last generation), by ``last_ns``."""
    ranks = tables.ranks
    if "generation" in ranks and ranks["generation"].notna().any():   # elastic: the last world (docs/ELASTIC.md)
        ranks = ranks[ranks["generation"] == ranks["generation"].max()]
    if not len(ranks):
        return pd.DataFrame({"rank": [], "last_ns": [], "closed": []})
    if "last_ts_ns" in ranks and ranks["last_ts_ns"].notna().all():
        last = dict(zip(ranks["rank"].tolist(), ranks["last_ts_ns"].astype("int64").tolist()))
    else:
        ev = tables.events
        last = (ev["t_ns"] + ev["dur_ns"]).groupby(ev["rank"]).max().astype("int64").to_dict()
    closed = ranks["closed"] if "closed" in ranks else ~ranks["truncated"].astype(bool)
    out = pd.DataFrame({"rank": ranks["rank"].astype("int64"), "closed": closed.astype(bool).to_numpy()})
    out["last_ns"] = out["rank"].map(last)
    out = out.dropna(subset=["last_ns"]).astype({"last_ns": "int64"})
    return out[["rank", "last_ns", "closed"]].sort_values(["last_ns", "rank"], ignore_index=True)


def stopped_first(ends, gap_ns: int = STOP_GAP_NS):
    """``{rank, last_ns, lead_ns}`` of an unclosed trace that stopped ``gap_ns`` before the others, or None."""
    if len(ends) < 2:
        return None
    first, rest = ends.iloc[0], ends.iloc[1:]
    lead = int(rest["last_ns"].min() - first["last_ns"])
    if bool(first["closed"]) or not (lead >= gap_ns or (lead > 0 and rest["closed"].all())):
        return None
    return {"rank": int(first["rank"]), "last_ns": int(first["last_ns"]), "lead_ns": lead}


def cut_together(ends, gap_ns: int = STOP_GAP_NS):
    """``(first_ns, last_ns)`` when every trace was cut within ``gap_ns``: the job was killed at once."""
    if len(ends) < 2 or ends["closed"].any():
        return None
    lo, hi = int(ends["last_ns"].min()), int(ends["last_ns"].max())
    return (lo, hi) if hi - lo < gap_ns else None


def incomplete_tensors(tables, size: int | None = None):
    """``COLUMNS`` per tensor some rank never submitted ("missing") or never got the result of."""
    size = int(size or tables.meta.get("size") or 0)
    ops = tables.tensor_ops
    rd = tables.readiness
    loaded = set(tables.ranks["rank"].tolist()) if len(tables.ranks) else set()
    end = int(tables.meta.get("end_ns") or 0)
    keyed = ops.assign(key=ops["step"].where(ops["step"] >= 0, ops["occurrence"]))
    rkeyed = rd.assign(key=rd["step"].where(rd["step"] >= 0, rd["occurrence"]))
    ready_by = rkeyed.groupby(["tensor", "key"])["rank"].agg(set).to_dict()
    # ranks we can judge: those with a trace of their own, plus all when the coordinator's ticks exist
    judged = (set(range(size)) if size and len(rd) else set()) | loaded
    everyone = set(range(size)) if size else judged
    ends = rank_ends(tables)
    went_past = _went_past(keyed, set(ends.loc[~ends["closed"], "rank"].tolist()))
    # only groups where some rank lacks a result can be incomplete: find them vectorised first
    agg = keyed.assign(has_done=keyed["done_ns"].notna()).groupby(["tensor", "key"]).agg(
        n=("rank", "nunique"), done=("has_done", "sum"))
    suspects = agg[(agg["done"] < agg["n"]) | (agg["done"] == 0)].index
    rows = []
    sub = keyed[pd.MultiIndex.from_frame(keyed[["tensor", "key"]]).isin(suspects)]
    for (tensor, key), g in sub.groupby(["tensor", "key"]):
        submitted = set(g["rank"].tolist()) | ready_by.get((tensor, key), set())
        done = set(g.loc[g["done_ns"].notna(), "rank"].tolist())
        # a result on any rank means the collective ran, so every rank took part
        first = int(g["submit_ns"].min())
        missing = [] if done else sorted(r for r in (everyone & judged) - submitted
                                         if went_past(r, tensor, key, g))
        unfinished = sorted((submitted & loaded) - done)
        if not missing and not unfinished:
            continue
        failed = g["error"].notna()
        failed_end = g.loc[failed, "end_ns"].max() if "end_ns" in g and failed.any() else None
        until = end if failed_end is None or pd.isna(failed_end) else int(failed_end)
        rows.append({"tensor": tensor, "step": int(g["step"].max()), "occurrence": int(g["occurrence"].min()),
                     "kind": "missing" if missing else "unfinished", "submitted_ranks": sorted(submitted),
                     "missing_ranks": missing, "unfinished_ranks": unfinished, "first_submit_ns": first,
                     "waited_ns": max(until - first, 0), "failed": bool(failed.any())})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["kind", "first_submit_ns"], ignore_index=True)


def _went_past(keyed, cut: set):
    """``f(rank, tensor, key, group)``: whether a cut trace went on past that tensor (may be missing it)."""
    if not cut:
        return lambda *_: True

    ranks = {}   # rank -> (submit times sorted, their (tensor, key) in that order)
    for r, g in keyed.sort_values("submit_ns", kind="stable").groupby("rank"):
        ranks[int(r)] = (g["submit_ns"].to_numpy(), list(zip(g["tensor"].tolist(), g["key"].tolist())))
    order = {}   # rank -> {(tensor, key): position in its submit order}

    def past(rank, tensor, key, group) -> bool:
        if rank not in cut:
            return True
        if rank not in ranks:
            return False
        first = group.loc[group["submit_ns"].idxmin()]
        lead = int(first["rank"])
        if lead not in order:
            order[lead] = {k: i for i, k in enumerate(ranks[lead][1])}
        seq = order[lead]
        x = seq.get((tensor, key), -1)
        times, keys = ranks[rank]
        tail = keys[int(np.searchsorted(times, int(first["submit_ns"]), side="right")):]
        return any(seq.get(k, x + 1) > x for k in tail)
    return past


def hangs_by_rank(hang_df):
    """Per missing rank: the tensors it never submitted, earliest first (the first row: the root cause)."""
    m = hang_df[hang_df["kind"] == "missing"].sort_values("first_submit_ns").explode("missing_ranks")
    if not len(m):
        return pd.DataFrame(columns=["rank", "tensors", "first_step", "first_submit_ns", "waiting_ranks", "names"])
    out = m.groupby("missing_ranks", sort=False).agg(
        tensors=("tensor", "size"), first_step=("step", "min"), first_submit_ns=("first_submit_ns", "first"),
        waiting_ranks=("submitted_ranks", "first"), names=("tensor", lambda s: s.iloc[:10].tolist()))
    out = out.rename_axis("rank").reset_index().astype({"rank": "int64"})
    return out.sort_values("first_submit_ns", ignore_index=True)
