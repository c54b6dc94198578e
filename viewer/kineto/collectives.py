"""Collectives table of a Kineto run: op, bytes, time, algbw and busbw (nccl-tests' factors).

Time is the NCCL kernel's duration (or, without GPU kernels, the backend's annotation, e.g. gloo's
``gloo:all_reduce``); bytes are S of nccl-tests (allreduce and broadcast: the buffer once; allgather,
reduce-scatter, all-to-all: the whole gathered buffer); busbw = algbw × 2(n−1)/n for allreduce, (n−1)/n
for allgather, reduce-scatter and all-to-all, 1 for broadcast and reduce. A collective whose size the
trace does not tell (older torch) keeps its time and has NaN bandwidths.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.analyses import communication

COLUMNS = ["rank", "step", "collective", "op", "backend", "activity", "dtype", "n", "bytes", "time_us",
           "algbw_gbps", "busbw_gbps", "factor"]
SUMMARY_COLUMNS = ["op", "dtype", "bytes", "n", "count", "time_us", "algbw_gbps", "busbw_gbps",
                   "busbw_max_gbps"]


def collectives_table(tables):
    """One row per collective per rank, in start order."""
    fo = tables.fused_ops
    bw = communication.op_bandwidth(fo, size=int(tables.meta.get("size") or 1))
    bw["collective"] = [t[0] if len(t) else None for t in fo["tensors"]]
    known = bw["bytes"] > 0
    for c in ("algbw_gbps", "busbw_gbps"):
        bw[c] = bw[c].where(known, np.nan)
    bw["bytes"] = bw["bytes"].astype("Int64").where(known)
    bw["time_us"] = bw["time_ns"] / 1000.0
    order = np.lexsort((fo["start_ns"].to_numpy(), fo["rank"].to_numpy()))
    return bw.iloc[order][COLUMNS].reset_index(drop=True)


def collectives_summary(table):
    """nccl-tests-style rows: per op, dtype, size and group size, the count and median time and
    bandwidths (``busbw_max_gbps``: the best seen)."""
    d = table.assign(op=table["op"].fillna("?"), dtype=table["dtype"].fillna("?"),
                     bytes=table["bytes"].astype("float64"))
    if not len(d):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in SUMMARY_COLUMNS})
    g = d.groupby(["op", "dtype", "bytes", "n"], dropna=False)
    out = g.agg(count=("time_us", "size"), time_us=("time_us", "median"), algbw_gbps=("algbw_gbps", "median"),
                busbw_gbps=("busbw_gbps", "median"), busbw_max_gbps=("busbw_gbps", "max")).reset_index()
    return out.sort_values(["op", "bytes"], ignore_index=True)[SUMMARY_COLUMNS]
