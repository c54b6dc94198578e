"""Communication: bandwidth per op (nccl-tests conventions), α-β fit per backend, efficiency."""
from __future__ import annotations

import numpy as np
import pandas as pd

_GATHERED = ("ALLGATHER", "REDUCESCATTER", "ALLTOALL")


def op_bandwidth(fused_ops, size: int, peak_busbw_gbps: float | None = None):
    """Per op and rank: nccl-tests' bytes, algbw and busbw (GB/s), efficiency against the peak."""
    df = fused_ops[["rank", "response", "step", "op", "backend", "activity", "dtype", "count", "bytes"]].copy()
    n = fused_ops["size"].where(fused_ops["size"] > 0, size).astype("int64")
    df["n"] = n
    op = df["op"].fillna("").str.upper()
    gathered, allreduce = op.isin(_GATHERED), op == "ALLREDUCE"
    df["bytes"] = np.where(gathered, df["bytes"] * n, df["bytes"]).astype("int64")
    t = fused_ops["comm_ns"].where(fused_ops["comm_ns"] > 0, fused_ops["end_ns"] - fused_ops["start_ns"])
    df["time_ns"] = t.astype("int64")
    secs = df["time_ns"].astype("float64") / 1e9
    df["algbw_gbps"] = np.where(secs > 0, df["bytes"] / secs.where(secs > 0, 1.0) / 1e9, np.nan)
    m = n.where(n > 1, 2)   # nccl-tests' busbw/algbw factor: allreduce 2(n−1)/n, gathered ops (n−1)/n, others 1
    df["factor"] = np.where(n <= 1, np.where(allreduce | gathered, 0.0, 1.0),
                            np.where(allreduce, 2.0 * (m - 1) / m, np.where(gathered, (m - 1) / m, 1.0)))
    df["busbw_gbps"] = df["algbw_gbps"] * df["factor"]
    if peak_busbw_gbps:
        df["efficiency"] = df["busbw_gbps"] / float(peak_busbw_gbps)
    else:
        best = df.groupby(df["backend"].fillna("?"))["busbw_gbps"].transform("max")
        df["efficiency"] = df["busbw_gbps"] / best.where(best > 0)
    return df.reset_index(drop=True)


def bandwidth_by_size(op_bw):
    """nccl-tests-style medians of :func:`op_bandwidth`, per power-of-two size bucket and op."""
    cols = ["size_bytes", "op", "ops", "time_us", "algbw_gbps", "busbw_gbps", "busbw_max_gbps", "efficiency"]
    d = op_bw[op_bw["bytes"] > 0]
    if not len(d):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    bucket = (2 ** np.floor(np.log2(d["bytes"].astype("float64")))).astype("int64")
    g = d.assign(size_bytes=bucket, op=d["op"].fillna("?")).groupby(["size_bytes", "op"])
    out = g.agg(ops=("bytes", "size"), time_us=("time_ns", "median"), algbw_gbps=("algbw_gbps", "median"),
                busbw_gbps=("busbw_gbps", "median"), busbw_max_gbps=("busbw_gbps", "max"),
                efficiency=("efficiency", "median")).reset_index()
    out["time_us"] = out["time_us"] / 1000.0
    return out[cols]


def alpha_beta_fit(op_bw):
    """time = α + bytes / β per backend and op, fitted to each size bucket's fastest op (n½ = α·β)."""
    cols = ["backend", "op", "ops", "sizes", "alpha_us", "beta_gbps", "half_bw_bytes", "r2"]
    rows = []
    for (backend, op), d in op_bw.groupby([op_bw["backend"].fillna("?"), op_bw["op"].fillna("?")]):
        d = d[d["bytes"] > 0]
        bucket = np.floor(np.log2(d["bytes"].astype("float64").clip(lower=1)))
        best = d.loc[d.groupby(bucket)["time_ns"].idxmin()] if len(d) else d
        x = best["bytes"].astype("float64").to_numpy()
        y = best["time_ns"].astype("float64").to_numpy() / 1e9
        alpha = beta = half = r2 = float("nan")
        if len(best) >= 2 and np.ptp(x) > 0:
            slope, icpt = np.polyfit(x, y, 1)
            if slope > 0:
                alpha, beta = max(icpt, 0.0), 1.0 / slope
                half = alpha * beta
                pred = icpt + slope * x
                ss = ((y - y.mean()) ** 2).sum()
                r2 = 1.0 - ((y - pred) ** 2).sum() / ss if ss > 0 else float("nan")
        rows.append({"backend": backend, "op": op, "ops": len(d), "sizes": len(best), "alpha_us": alpha * 1e6,
                     "beta_gbps": beta / 1e9, "half_bw_bytes": half, "r2": r2})
    return pd.DataFrame(rows, columns=cols)


def credible(ab):
    """The fits that mean something: >= 5 ops over >= 3 sizes, r² >= 0.8, α >= 1 µs and n½ >= 1 KiB."""
    return ab[(ab["ops"] >= 5) & (ab["sizes"] >= 3) & (ab["r2"] >= 0.8) & (ab["alpha_us"] >= 1)
              & (ab["half_bw_bytes"] >= 1024)]
