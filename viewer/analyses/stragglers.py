"""Negotiation and stragglers: who submitted each tensor last, and what that cost the others."""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.analyses import intervals

NEGOTIATION_COLUMNS = ["tensor", "step", "occurrence", "rank", "ready_ns", "source", "n_ranks", "first_ns",
                       "last_ns", "last_rank", "is_last", "lateness_ns", "spread_ns", "wait_imposed_ns"]


def negotiations(tables, size: int | None = None):
    """``NEGOTIATION_COLUMNS`` per complete negotiation and rank (Horovod: two ranks seen suffice)."""
    empty = pd.DataFrame({c: pd.Series(dtype="object") for c in NEGOTIATION_COLUMNS})
    ops = tables.tensor_ops
    if len(ops) and ops["rank"].nunique() >= 2:   # each rank's own submit, else the coordinator's ticks
        df = ops[NEGOTIATION_COLUMNS[:4] + ["submit_ns"]].rename(columns={"submit_ns": "ready_ns"})
        df = df.assign(source="submit")
    else:
        df = tables.readiness[NEGOTIATION_COLUMNS[:6]]
    if not len(df):
        return empty
    size = size or int(tables.meta.get("size") or df["rank"].nunique())
    # integer arrays sorted once, names as codes: grouping on the names was the summary's peak memory
    tensor = pd.factorize(df["tensor"], sort=True)[0]
    step, rank, ready = (df[c].to_numpy() for c in ("step", "rank", "ready_ns"))
    key = np.where(step >= 0, step, df["occurrence"].to_numpy())
    # ops before the first step (initial broadcasts) are setup, not training
    rows = np.flatnonzero((tensor >= 0) & ((step >= 0) | (step < 0).all()))
    rows = rows[np.lexsort((rank[rows], key[rows], tensor[rows]))]   # stable: a repeat after its first
    rows = rows[_runs(tensor[rows], key[rows], rank[rows])[0] == np.arange(len(rows))]
    rows = rows[np.lexsort((rank[rows], ready[rows], key[rows], tensor[rows]))]
    horovod = bool((df["source"] == "horovod").to_numpy()[rows].all())
    rows = rows[_runs(tensor[rows], key[rows])[1] >= (2 if horovod else max(size, 2))]
    if not len(rows):
        return empty
    start, n_ranks = _runs(tensor[rows], key[rows])
    end, ready = start + n_ranks - 1, ready[rows]
    median = (ready[start + (n_ranks - 1) // 2].astype("float64") + ready[start + n_ranks // 2]) / 2
    is_last = np.arange(len(rows)) == end
    # the previous time as a float, as the median: the figures pandas' group median and shift gave
    prev = np.where(start == np.arange(len(rows)), ready, np.roll(ready, 1)).astype("float64")
    out = {c: df[c].array.take(rows) for c in NEGOTIATION_COLUMNS[:6]}
    out.update(n_ranks=n_ranks, first_ns=ready[start], last_ns=ready[end],
               last_rank=rank[rows][end].astype("int64"), is_last=is_last,
               lateness_ns=(ready - median).astype("int64"), spread_ns=ready[end] - ready[start],
               wait_imposed_ns=np.where(is_last, ready - prev, 0).astype("int64"))
    return pd.DataFrame(out, copy=False)   # no copy into one block per dtype


def _runs(*keys):
    """Rows sorted by ``keys``, in runs of equal keys: each row's run start (its index) and run length."""
    new = np.ones(len(keys[0]), bool)
    new[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    starts = np.flatnonzero(new)
    lengths = np.diff(np.append(starts, len(new)))
    return np.repeat(starts, lengths), np.repeat(lengths, lengths)


def rank_stragglers(neg, size: int | None = None):
    """Per rank: how often it was last, the wait it imposed (overlaps counted once), its lateness."""
    cols = ["rank", "negotiations", "times_last", "pct_last", "wait_imposed_ns", "wait_imposed_per_step_ns",
            "median_lateness_ns", "p90_lateness_ns", "steps"]
    if neg is None or not len(neg):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    steps = neg["step"].where(neg["step"] >= 0, neg["occurrence"])
    n_steps = max(int(steps.nunique()), 1)
    steps_known = bool((neg["step"] >= 0).any())
    ranks = sorted(set(neg["rank"].tolist()) | set(range(size or 0)))
    g = neg.groupby("rank")   # one pass over the rows, not one per rank
    n = g.size().reindex(ranks, fill_value=0)
    lateness = g["lateness_ns"]
    last = neg[neg["is_last"]]
    code = pd.Index(ranks).get_indexer(last["rank"])
    waits = intervals.union_lengths(code, last["ready_ns"] - last["wait_imposed_ns"], last["ready_ns"], len(ranks))
    times_last = np.bincount(code, minlength=len(ranks))
    out = pd.DataFrame({
        "rank": np.asarray(ranks, dtype="int64"), "negotiations": n.to_numpy(), "times_last": times_last,
        "pct_last": np.where(n > 0, 100.0 * times_last / n.clip(lower=1), 0.0), "wait_imposed_ns": waits,
        "wait_imposed_per_step_ns": waits / n_steps,
        "median_lateness_ns": lateness.median().astype("float64").reindex(ranks, fill_value=0.0).to_numpy(),
        "p90_lateness_ns": lateness.quantile(0.9).astype("float64").reindex(ranks, fill_value=0.0).to_numpy(),
        "steps": n_steps if steps_known else 0,
    }, columns=cols)
    return out.sort_values(["wait_imposed_ns", "times_last"], ascending=False, ignore_index=True)


def per_tensor(neg):
    """One row per negotiation, in time order: last rank, spread and imposed wait."""
    cols = ["tensor", "step", "occurrence", "n_ranks", "first_ns", "last_ns", "last_rank", "spread_ns",
            "wait_imposed_ns", "source"]
    if neg is None or not len(neg):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    out = neg[neg["is_last"]][cols]
    return out.sort_values("first_ns", ignore_index=True)


def tensor_waits(per):
    """Per tensor of :func:`per_tensor`: its waits from the first rank ready to the last, longest first."""
    cols = ["tensor", "negotiations", "mean_wait_ns", "max_wait_ns", "usual_last_rank"]
    if not len(per):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    g = per.groupby(per["tensor"].astype(object))
    out = pd.DataFrame({"negotiations": g.size(), "mean_wait_ns": g["spread_ns"].mean(),
                        "max_wait_ns": g["spread_ns"].max(),
                        "usual_last_rank": g["last_rank"].agg(lambda s: s.mode().iloc[0])})
    return out.rename_axis("tensor").reset_index().sort_values("mean_wait_ns", ascending=False, ignore_index=True)


def late_ranks(strag, size: int, step_ns: float | None = None):
    """The rows of ``strag`` last far more often than chance, at a cost over noise (5x: healthy shows 4x)."""
    if strag is None or not len(strag) or size < 2:
        return pd.DataFrame(columns=[*(strag.columns if strag is not None else []), "per_step_ns", "share_pct"])
    groups = int(strag["times_last"].sum())
    per_step = strag["wait_imposed_per_step_ns"].where(strag["steps"] > 0, strag["wait_imposed_ns"])
    share = (100.0 * per_step / step_ns).where(strag["steps"] > 0, 0.0) if step_ns else per_step * 0.0
    waits = strag["wait_imposed_ns"].sort_values(ascending=False).to_numpy()
    # the rank holding the others up far longer than any other, though noise makes others last too
    dominant = (strag["wait_imposed_ns"] == waits[0]) & (len(waits) > 1 and waits[0] >= 5 * waits[1] > 0)
    often = strag["pct_last"] >= max(50.0, 150.0 / size)
    keep = ((strag["times_last"] >= max(3, 0.25 * groups))
            & (often | dominant & (strag["pct_last"] >= 150.0 / size)) & ((per_step >= 100_000) | (share >= 2)))
    return strag.assign(per_step_ns=per_step, share_pct=share)[keep].reset_index(drop=True)


HOST_COLUMNS = ["host", "ranks", "negotiations", "times_last", "pct_last", "wait_imposed_ns", "per_step_ns",
                "share_pct", "median_lead_ns", "clock_uncertainty_ns", "steps"]


def late_hosts(neg, hosts: dict, step_ns: float | None = None):
    """Hosts whose ranks were all ready after every other host's in half the negotiations, at a cost."""
    empty = pd.DataFrame({c: pd.Series(dtype="object") for c in HOST_COLUMNS})
    if neg is None or not len(neg) or len(set(hosts.values())) < 2:
        return empty
    df = neg[neg["rank"].isin(list(hosts))]
    df = df.assign(host=[hosts[int(r)] for r in df["rank"]],
                   key=df["step"].where(df["step"] >= 0, df["occurrence"]))
    per = df.groupby(["tensor", "key", "host"], sort=False)["ready_ns"].agg(["min", "max"]).reset_index()
    n_groups = int(df.groupby(["tensor", "key"]).ngroups)
    n_steps = max(int(df["key"].nunique()), 1)
    steps_known = bool((df["step"] >= 0).any())
    size = {h: sorted(r for r, x in hosts.items() if x == h) for h in set(hosts.values())}
    rows = []
    for h, ranks in sorted(size.items()):
        if len(ranks) < 2:
            continue
        mine = per[per["host"] == h].set_index(["tensor", "key"])
        others = per[per["host"] != h].groupby(["tensor", "key"])["max"].max()
        both = mine.join(others.rename("others_last"), how="inner")
        last = both[both["min"] > both["others_last"]]
        if not len(last):
            continue
        waits = intervals.length(zip(last["others_last"], last["max"]))
        per_step = waits / n_steps if steps_known else float(waits)
        share = 100.0 * per_step / step_ns if step_ns and steps_known else 0.0
        pct = 100.0 * len(last) / n_groups
        if len(last) >= 3 and pct >= 50.0 and (per_step >= 100_000 or share >= 2):
            rows.append({"host": h, "ranks": ranks, "negotiations": n_groups, "times_last": int(len(last)),
                         "pct_last": pct, "wait_imposed_ns": int(waits), "per_step_ns": per_step,
                         "share_pct": share,
                         "median_lead_ns": float(np.median(last["min"] - last["others_last"])),
                         "clock_uncertainty_ns": pd.NA, "steps": n_steps if steps_known else 0})
    return pd.DataFrame(rows, columns=HOST_COLUMNS) if rows else empty
