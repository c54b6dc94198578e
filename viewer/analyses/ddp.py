"""DDP's buckets (docs/DDP.md), from a watched job's trace: each bucket's size, when it was ready in the
backward pass, how long its allreduce took, how much of it the training thread waited on, and the rank
that was last to have it ready.

A run is read in its usual bucket layout: the steps whose bucket count is the most common one (DDP's
first step reduces every gradient in one bucket, then rebuilds the buckets in gradient order).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

BUCKET_COLUMNS = ["bucket", "steps", "bytes", "cap_bytes", "params", "ready_ns", "comm_ns", "exposed_ns",
                  "last_rank", "pct_last", "wait_imposed_ns"]


def bucket_index(tensors) -> int:
    """``bucket.<k>`` -> k (-1 for a collective that is not a bucket)."""
    name = tensors[0] if len(tensors) else ""
    return int(name[7:]) if name.startswith("bucket.") and name[7:].isdigit() else -1


def with_bucket(fused_ops: pd.DataFrame) -> pd.DataFrame:
    """The fused ops that are DDP buckets, with their ``bucket`` index."""
    fo = fused_ops.assign(bucket=[bucket_index(t) for t in fused_ops["tensors"]])
    return fo[fo["bucket"] >= 0]


def bucket_steps(tables) -> pd.DataFrame:
    """Per rank, step and bucket of the usual layout: bytes, cap, params, ``ready_ns`` after the backward
    pass began, ``comm_ns`` (queued to done) and ``exposed_ns`` (the part after the pass's own work
    ended, at its SYNCHRONIZE: what the training thread waited on)."""
    fo = with_bucket(tables.fused_ops)
    fo = fo[fo["step"] >= 0]
    if not len(fo):
        return pd.DataFrame(columns=["rank", "step", "bucket", "response", "bytes", "cap_bytes", "params",
                                     "start_ns", "end_ns", "ready_ns", "comm_ns", "exposed_ns"])
    count = fo.groupby(["rank", "step"])["bucket"].transform("size")
    fo = fo[count == count.mode().max()]
    ev = tables.events_without_ops
    first = ev[ev["name"].isin(["BACKWARD", "SYNCHRONIZE"]) & (ev["ph"] == "X")]
    first = first.sort_values("t_ns").groupby(["rank", "step", "name"])["t_ns"].first().unstack()
    first = first.reindex(columns=["BACKWARD", "SYNCHRONIZE"])
    out = fo.join(first, on=["rank", "step"])
    sync = out["SYNCHRONIZE"].astype("float64")
    return pd.DataFrame({
        "rank": out["rank"], "step": out["step"], "bucket": out["bucket"], "response": out["response"],
        "bytes": out["bytes"], "cap_bytes": out["threshold"], "params": out["count"],
        "start_ns": out["start_ns"], "end_ns": out["end_ns"],
        "ready_ns": out["start_ns"] - out["BACKWARD"].astype("float64"), "comm_ns": out["comm_ns"],
        "exposed_ns": np.clip(out["end_ns"] - sync.fillna(out["end_ns"].astype("float64")), 0, None),
    }).reset_index(drop=True)


def buckets(steps: pd.DataFrame, neg: pd.DataFrame | None) -> pd.DataFrame:
    """Per bucket, medians over its steps and ranks; ``last_rank``: the rank most often last to have it
    ready, ``pct_last`` of the bucket's steps, ``wait_imposed_ns``: the median wait per step it imposed."""
    if not len(steps):
        return pd.DataFrame(columns=BUCKET_COLUMNS)
    g = steps.groupby("bucket")
    out = g.agg(steps=("step", "nunique"), bytes=("bytes", "median"), cap_bytes=("cap_bytes", "median"),
                params=("params", "median"), ready_ns=("ready_ns", "median"), comm_ns=("comm_ns", "median"),
                exposed_ns=("exposed_ns", "median")).reset_index()
    out["last_rank"], out["pct_last"], out["wait_imposed_ns"] = pd.NA, np.nan, np.nan
    if neg is not None and len(neg):
        keys = set(zip(steps["step"], "bucket." + steps["bucket"].astype(str)))
        mine = np.array([k in keys for k in zip(neg["step"], neg["tensor"])], dtype=bool)
        last = neg[neg["is_last"].astype(bool).to_numpy() & mine]
        if len(last):
            last = last.assign(bucket=last["tensor"].str.slice(7).astype("int64"))
            per = last.groupby("bucket")
            top = per["rank"].agg(lambda r: int(r.value_counts().idxmax()))
            out["last_rank"] = out["bucket"].map(top).astype("Int64")
            hits = last[last["rank"] == last["bucket"].map(top)].groupby("bucket").size()
            out["pct_last"] = 100.0 * out["bucket"].map(hits).fillna(0) / out["bucket"].map(per.size())
            out["wait_imposed_ns"] = out["bucket"].map(per["wait_imposed_ns"].median())
    return out[BUCKET_COLUMNS]



def layout(steps: pd.DataFrame) -> dict | None:
    """The usual layout in figures: ``buckets`` a step, the gradients' ``bytes`` a step, the ``cap``, the
    ``median_bytes`` of a bucket, and ``busy_ns``: per step, the time some bucket's allreduce was in
    flight (the union of their spans on the rank where it was least, the median over the steps)."""
    if not len(steps):
        return None
    per_step = steps.groupby(["rank", "step"])
    busy = steps.assign(queued=steps["end_ns"] - steps["comm_ns"]).groupby(["rank", "step"])[
        ["queued", "end_ns"]].apply(lambda d: _union_ns(d["queued"].to_numpy(), d["end_ns"].to_numpy()))
    return {"buckets": int(per_step.size().median()), "bytes": int(per_step["bytes"].sum().median()),
            "cap": int(steps["cap_bytes"].median()), "median_bytes": int(steps["bytes"].median()),
            "busy_ns": int(busy.groupby(level="step").min().median())}


def _union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    total, reach = 0, None
    for a, b in sorted(zip(starts.tolist(), ends.tolist())):
        if reach is None or a > reach:
            total, reach = total + (b - a), b
        elif b > reach:
            total, reach = total + (b - reach), b
    return int(total)
