"""Fusion: how full each fused op was, what the memcpy cost, tensor sizes and cycle utilisation."""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.analyses import intervals

FULL_FILL = 0.9  # an op this close to the threshold was cut by it


def fused_op_fill(fused_ops, threshold: int | None = None):
    """Per fused op: fill ratio against the threshold (``threshold`` for ops that recorded none), memcpy share."""
    cols = ["rank", "response", "step", "op", "backend", "count", "bytes", "threshold", "start_ns",
            "memcpy_in_ns", "memcpy_out_ns", "comm_ns"]
    df = fused_ops[cols].copy()
    df["threshold"] = thr = df["threshold"].astype("float64").fillna(float(threshold or "nan"))
    df["duration_ns"] = fused_ops["end_ns"] - fused_ops["start_ns"]
    df["fill_ratio"] = np.where(thr > 0, df["bytes"] / thr, np.nan)
    df["full"] = df["fill_ratio"] >= FULL_FILL
    df["memcpy_ns"] = df["memcpy_in_ns"] + df["memcpy_out_ns"]
    dur = df["duration_ns"].astype("float64")
    df["memcpy_share"] = np.where(dur > 0, df["memcpy_ns"] / dur.where(dur > 0, 1.0), 0.0)
    return df.reset_index(drop=True)


def fusion_summary(fill):
    """One-row overview of :func:`fused_op_fill` (the lowest rank's ops: each collective counts once)."""
    cols = ["ops", "tensors", "mean_tensors_per_op", "single_tensor_pct", "median_bytes", "median_fill",
            "full_pct", "memcpy_share", "threshold"]
    if fill is None or not len(fill):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    d = fill[fill["rank"] == fill["rank"].min()]
    dur = d["duration_ns"].sum()
    thr = d["threshold"].dropna()
    return pd.DataFrame([{
        "ops": len(d), "tensors": int(d["count"].sum()), "mean_tensors_per_op": float(d["count"].mean()),
        "single_tensor_pct": 100.0 * float((d["count"] <= 1).mean()),
        "median_bytes": float(d["bytes"].median()), "median_fill": float(d["fill_ratio"].median()),
        "full_pct": 100.0 * float(d["full"].mean()) if thr.size else float("nan"),
        "memcpy_share": float(d["memcpy_ns"].sum() / dur) if dur > 0 else 0.0,
        "threshold": float(thr.median()) if thr.size else float("nan"),
    }], columns=cols)


def tensor_size_histogram(tensor_ops):
    """Tensor sizes in power-of-two buckets [lo, hi) (one rank, so each tensor op counts once)."""
    cols = ["bucket_lo", "bucket_hi", "tensor_ops", "bytes", "pct_ops", "pct_bytes"]
    ops = tensor_ops.dropna(subset=["bytes"])
    if not len(ops):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    ops = ops[ops["rank"] == ops["rank"].min()]
    b = ops["bytes"].astype("int64").to_numpy()
    exp = np.floor(np.log2(np.maximum(b, 1))).astype("int64")
    df = pd.DataFrame({"exp": exp, "bytes": b}).groupby("exp").agg(tensor_ops=("bytes", "size"),
                                                                   bytes=("bytes", "sum")).reset_index()
    df["bucket_lo"] = (2 ** df["exp"]).astype("int64")
    df["bucket_hi"] = (2 ** (df["exp"] + 1)).astype("int64")
    df["pct_ops"] = 100.0 * df["tensor_ops"] / df["tensor_ops"].sum()
    df["pct_bytes"] = 100.0 * df["bytes"] / max(df["bytes"].sum(), 1)
    return df[cols]


def cycle_utilisation(cycles, fused_ops):
    """Per rank: engine cycles, those that ran a response, and the share of cycle time inside fused ops."""
    cols = ["rank", "cycles", "busy_cycles", "busy_pct", "mean_cycle_ns", "responses_per_busy_cycle",
            "busy_time_pct"]
    rows = []
    for rank, cy in cycles.groupby("rank"):
        fo = fused_ops[fused_ops["rank"] == rank]
        starts = np.sort(fo["start_ns"].to_numpy())
        lo = np.searchsorted(starts, cy["start_ns"].to_numpy(), side="left")
        hi = np.searchsorted(starts, cy["end_ns"].to_numpy(), side="left")
        per = hi - lo
        busy = int((per > 0).sum())
        total = int((cy["end_ns"] - cy["start_ns"]).sum())
        inside = intervals.intersection_length(zip(cy["start_ns"], cy["end_ns"]), zip(fo["start_ns"], fo["end_ns"]))
        rows.append({"rank": int(rank), "cycles": len(cy), "busy_cycles": busy,
                     "busy_pct": 100.0 * busy / len(cy) if len(cy) else 0.0,
                     "mean_cycle_ns": total / len(cy) if len(cy) else 0.0,
                     "responses_per_busy_cycle": float(per[per > 0].mean()) if busy else 0.0,
                     "busy_time_pct": 100.0 * inside / total if total else 0.0})
    return pd.DataFrame(rows, columns=cols)
