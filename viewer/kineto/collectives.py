"""The collectives of a Kineto run: bandwidths (nccl-tests' conventions) and who launched each last (docs/KINETO.md)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.analyses import communication, stragglers

COLUMNS = ["rank", "step", "collective", "op", "backend", "activity", "dtype", "n", "bytes", "time_us",
           "algbw_gbps", "busbw_gbps", "factor"]
SUMMARY_COLUMNS = ["op", "dtype", "bytes", "n", "count", "time_us", "algbw_gbps", "busbw_gbps",
                   "busbw_max_gbps"]
STRAGGLER_COLUMNS = ["tensor", "step", "op", "n_ranks", "last_rank", "spread_ns", "wait_imposed_ns",
                     "within_clock_uncertainty"]


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
    """Per op, dtype, size and group size: the count, median time and bandwidths, and the best busbw."""
    d = table.assign(op=table["op"].fillna("?"), dtype=table["dtype"].fillna("?"),
                     bytes=table["bytes"].astype("float64"))
    if not len(d):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in SUMMARY_COLUMNS})
    g = d.groupby(["op", "dtype", "bytes", "n"], dropna=False)
    out = g.agg(count=("time_us", "size"), time_us=("time_us", "median"), algbw_gbps=("algbw_gbps", "median"),
                busbw_gbps=("busbw_gbps", "median"), busbw_max_gbps=("busbw_gbps", "max")).reset_index()
    return out.sort_values(["op", "bytes"], ignore_index=True)[SUMMARY_COLUMNS]


def ranks_loaded(tables) -> int:
    """How many ranks the run loaded (launches are compared among them only)."""
    return max(int(tables.ranks["rank"].nunique()), 1)


def collective_stragglers(tables, launches):
    """Per collective seen on every loaded rank: its last launcher, spread and imposed wait (vs clock doubt)."""
    last = launches[launches["is_last"].astype(bool)]
    if not len(last):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in STRAGGLER_COLUMNS})
    worst = max(tables.ranks["clock_offset_uncertainty_ns"].fillna(0).astype("int64").tolist(), default=0)
    ops = tables.tensor_ops.drop_duplicates(["tensor", "step"]).set_index(["tensor", "step"])["op"]
    out = last.assign(op=[ops.get((t, s)) for t, s in zip(last["tensor"], last["step"])])
    out["within_clock_uncertainty"] = out["wait_imposed_ns"] <= 2 * worst
    return out.sort_values("wait_imposed_ns", ascending=False, ignore_index=True)[STRAGGLER_COLUMNS]


def rank_summary(tables, launches):
    """:func:`viewer.analyses.stragglers.rank_stragglers` per rank, with its clock offset and uncertainty."""
    out = stragglers.rank_stragglers(launches, size=ranks_loaded(tables))
    r = tables.ranks.set_index("rank")
    out["clock_offset_ns"] = out["rank"].map(r["clock_offset_ns"]).astype("Int64")
    out["clock_offset_uncertainty_ns"] = out["rank"].map(r["clock_offset_uncertainty_ns"]).astype("Int64")
    return out
