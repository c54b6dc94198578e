"""Reshape a run's schema tables into what the pages draw (pure functions, no plotting).

These are view-shaped reductions (a rank x step matrix, a histogram-ready column, one row per
message size); the findings themselves come from ``viewer.analyses`` where it provides them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from viewer.analyses import communication as _comm
from viewer.analyses.communication import bus_factor  # noqa: F401  (re-exported for the figures)

_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4, "int64": 8,
                "uint8": 1, "int8": 1}


def run_size(t) -> int:
    size = t.meta.get("size")
    if size:
        return int(size)
    n = [len(t.ranks)]
    for df, col in ((t.tensor_ops, "rank"), (t.readiness, "rank")):
        if len(df):
            n.append(int(df[col].nunique()))
    return max(n)


def step_spans(t) -> pd.DataFrame:
    """One row per (rank, step): start_ns, end_ns — from STEP spans, else from the tensor ops."""
    ev = t.events
    steps = ev[(ev["name"] == "STEP") & (ev["ph"] == "X")]
    if len(steps):
        out = pd.DataFrame({"rank": steps["rank"].to_numpy(), "step": steps["step"].to_numpy(),
                            "start_ns": steps["t_ns"].to_numpy(),
                            "end_ns": (steps["t_ns"] + steps["dur_ns"]).to_numpy()})
        return out[out["step"] >= 0].reset_index(drop=True)
    ops = t.tensor_ops[t.tensor_ops["step"] >= 0]
    if ops.empty:
        return pd.DataFrame({"rank": [], "step": [], "start_ns": [], "end_ns": []}, dtype="int64")
    done = ops["done_ns"].astype("float64").fillna(ops["submit_ns"].astype("float64"))
    g = ops.assign(done=done).groupby(["rank", "step"])
    return pd.DataFrame({"start_ns": g["submit_ns"].min(), "end_ns": g["done"].max().astype("int64")}
                        ).reset_index()


def step_window(t, step: int, rank=None):
    """(t0, t1) in ns covering ``step`` (on ``rank`` if given, else on every rank), or None."""
    spans = step_spans(t)
    sel = spans[spans["step"] == step]
    if rank is not None and (sel["rank"] == rank).any():
        sel = sel[sel["rank"] == rank]
    if sel.empty:
        return None
    return int(sel["start_ns"].min()), int(sel["end_ns"].max())


def lateness(t) -> pd.DataFrame:
    """Per (tensor, step, rank): when the rank was ready and how late (ns) after the first rank.

    Uses every rank's submit times when the trace has them (ringscope), else the coordinator's
    readiness ticks (Horovod timelines, where ``step`` is the n-th negotiation of the tensor).
    """
    ops = t.tensor_ops
    if len(ops) and ops["rank"].nunique() > 1:
        df = pd.DataFrame({"tensor": ops["tensor"].astype(object), "step": ops["step"].to_numpy(),
                           "rank": ops["rank"].to_numpy(), "ready_ns": ops["submit_ns"].to_numpy()})
    elif len(t.readiness):
        rd = t.readiness
        step = np.where(rd["step"].to_numpy() >= 0, rd["step"].to_numpy(), rd["occurrence"].to_numpy())
        df = pd.DataFrame({"tensor": rd["tensor"].astype(object), "step": step,
                           "rank": rd["rank"].to_numpy(), "ready_ns": rd["ready_ns"].to_numpy()})
    else:
        return pd.DataFrame(columns=["tensor", "step", "rank", "ready_ns", "late_ns"])
    df = df.dropna(subset=["ready_ns"])
    first = df.groupby(["tensor", "step"])["ready_ns"].transform("min")
    return df.assign(late_ns=(df["ready_ns"] - first).astype("int64"))


def lateness_from_negotiations(neg: pd.DataFrame) -> pd.DataFrame:
    """``lateness()``'s shape from ``viewer.analyses.stragglers.negotiations`` rows."""
    step = np.where(neg["step"].to_numpy() >= 0, neg["step"].to_numpy(), neg["occurrence"].to_numpy())
    return pd.DataFrame({"tensor": neg["tensor"].astype(object).to_numpy(), "step": step,
                         "rank": neg["rank"].to_numpy(), "ready_ns": neg["ready_ns"].to_numpy(),
                         "late_ns": (neg["ready_ns"] - neg["first_ns"]).to_numpy(dtype="int64")})


def stragglers_from_analysis(st: pd.DataFrame) -> pd.DataFrame:
    """``times_last()``'s shape from ``viewer.analyses.stragglers.rank_stragglers`` rows."""
    out = pd.DataFrame({"rank": st["rank"].astype(int), "times_last": st["times_last"].astype(int),
                        "share_last": st["pct_last"].astype(float) / 100.0,
                        "wait_imposed_ms": st["wait_imposed_ns"].astype(float) / 1e6,
                        "median_late_ms": st["median_lateness_ns"].astype(float) / 1e6})
    return out.sort_values("rank", ignore_index=True)


def lateness_matrix(late: pd.DataFrame) -> pd.DataFrame:
    """Rank x step matrix of mean lateness in ms (rows: ranks, columns: steps)."""
    if late.empty:
        return pd.DataFrame()
    return (late.groupby(["rank", "step"])["late_ns"].mean() / 1e6).unstack("step").sort_index()


def times_last(late: pd.DataFrame) -> pd.DataFrame:
    """Per rank: negotiations where it was strictly last, share of them, and the wait it imposed."""
    cols = ["rank", "times_last", "share_last", "wait_imposed_ms", "median_late_ms"]
    if late.empty:
        return pd.DataFrame(columns=cols)
    g = late.groupby(["tensor", "step"])
    n_ranks = g["rank"].transform("size")
    top = g["ready_ns"].transform("max")
    is_top = late["ready_ns"] == top
    ties = is_top.groupby([late["tensor"], late["step"]]).transform("sum")
    second = late.assign(r=late["ready_ns"].where(~is_top)).groupby(["tensor", "step"])["r"].transform("max")
    last = late[is_top & (ties == 1) & (n_ranks > 1)]
    imposed = (last["ready_ns"] - second[last.index]) / 1e6
    negotiations = late.loc[n_ranks > 1, ["tensor", "step"]].drop_duplicates().shape[0] or 1
    out = pd.DataFrame({"rank": sorted(late["rank"].unique())})
    cnt = last.groupby("rank").size()
    out["times_last"] = out["rank"].map(cnt).fillna(0).astype(int)
    out["share_last"] = out["times_last"] / negotiations
    out["wait_imposed_ms"] = out["rank"].map(imposed.groupby(last["rank"]).sum()).fillna(0.0)
    out["median_late_ms"] = out["rank"].map(late.groupby("rank")["late_ns"].median() / 1e6)
    return out[cols]


def tensor_waits(late: pd.DataFrame, top: int = 50) -> pd.DataFrame:
    """Per tensor: negotiations, mean and max spread first-to-last ready (ms), the usual last rank."""
    cols = ["tensor", "negotiations", "mean_wait_ms", "max_wait_ms", "usual_last_rank"]
    if late.empty:
        return pd.DataFrame(columns=cols)
    g = late.groupby(["tensor", "step"])
    per = pd.DataFrame({"spread": g["late_ns"].max() / 1e6,
                        "last": g.apply(lambda d: d["rank"].iloc[int(np.argmax(d["ready_ns"].to_numpy()))],
                                        include_groups=False)}).reset_index()
    gt = per.groupby("tensor")
    out = pd.DataFrame({"negotiations": gt.size(), "mean_wait_ms": gt["spread"].mean(),
                        "max_wait_ms": gt["spread"].max(),
                        "usual_last_rank": gt["last"].agg(lambda s: s.mode().iloc[0])}).reset_index()
    return out.sort_values("mean_wait_ms", ascending=False).head(top)[cols].reset_index(drop=True)


def fusion(t) -> pd.DataFrame:
    """Fused ops (rank 0's view when present) with fill ratio against the threshold and memcpy share."""
    f = t.fused_ops
    if f.empty:
        return f.assign(fill=pd.Series(dtype="float64"), memcpy_share=pd.Series(dtype="float64"))
    if (f["rank"] == 0).any():
        f = f[f["rank"] == 0]
    thr = f["threshold"].astype("float64").fillna(float(t.meta.get("fusion_threshold") or np.nan))
    dur = (f["end_ns"] - f["start_ns"]).clip(lower=1)
    return f.assign(fill=(f["bytes"] / thr).astype("float64"),
                    memcpy_share=((f["memcpy_in_ns"] + f["memcpy_out_ns"]) / dur).astype("float64"))


def fusion_threshold(t):
    f = t.fused_ops
    if len(f) and f["threshold"].notna().any():
        return int(f["threshold"].dropna().mode().iloc[0])
    thr = t.meta.get("fusion_threshold")
    return int(thr) if thr else None


def comm_ops(t) -> pd.DataFrame:
    """Per executed op: bytes, comm time, algbw and busbw in GB/s, from ``viewer.analyses``'
    ``op_bandwidth`` (nccl-tests conventions, so the page agrees with ``ringscope summarize``)."""
    cols = ["rank", "op", "backend", "dtype", "bytes", "time_us", "algbw", "busbw", "size"]
    f = t.fused_ops
    f = f[(f["comm_ns"] > 0) & (f["bytes"] > 0)]
    bw = _comm.op_bandwidth(f, run_size(t)) if len(f) else f
    if len(bw):
        bw = bw[bw["n"] >= 2]  # a one-rank op moves nothing over the wire
    if not len(bw):
        return pd.DataFrame(columns=cols)
    return pd.DataFrame({"rank": bw["rank"].to_numpy(), "op": bw["op"].to_numpy(),
                         "backend": bw["backend"].to_numpy(), "dtype": bw["dtype"].to_numpy(),
                         "bytes": bw["bytes"].to_numpy(), "time_us": (bw["time_ns"] / 1e3).to_numpy(),
                         "algbw": bw["algbw_gbps"].to_numpy(), "busbw": bw["busbw_gbps"].to_numpy(),
                         "size": bw["n"].to_numpy()})


def alpha_beta(comm: pd.DataFrame) -> dict:
    """``viewer.analyses``' α-β fit per backend and op: {"ring ALLREDUCE": (alpha_us, beta_GBps)}."""
    if comm.empty:
        return {}
    fit = _comm.alpha_beta_fit(comm.assign(time_ns=comm["time_us"] * 1e3))
    return {f"{r.backend} {r.op}": (float(r.alpha_us), float(r.beta_gbps))
            for r in fit.itertuples() if r.beta_gbps == r.beta_gbps}


def nccl_table(comm: pd.DataFrame) -> pd.DataFrame:
    """nccl-tests-style rows per message size: size, count, type, redop, time (us), algbw, busbw."""
    if comm.empty:
        return pd.DataFrame(columns=["size", "count", "type", "op", "time_us", "algbw", "busbw", "samples"])
    g = comm.groupby(["bytes", "dtype", "op"])
    out = g.agg(time_us=("time_us", "median"), algbw=("algbw", "median"), busbw=("busbw", "median"),
                samples=("time_us", "size")).reset_index()
    out["count"] = [int(b // _DTYPE_BYTES.get(str(d), 1)) for b, d in zip(out["bytes"], out["dtype"])]
    out = out.rename(columns={"bytes": "size", "dtype": "type"})
    return out[["size", "count", "type", "op", "time_us", "algbw", "busbw", "samples"]].sort_values("size")


def headline(t, peak_gbps=None, stragglers=None) -> dict:
    """The overview's numbers: step time, exposed communication %, busbw efficiency, worst straggler."""
    out = {"step_ms": None, "exposed_pct": None, "busbw_eff": None, "peak_gbps": peak_gbps,
           "straggler_rank": None, "straggler_share": None, "straggler_wait_ms": None}
    spans = step_spans(t)
    if len(spans):
        per_step = spans.groupby("step").agg(s=("start_ns", "min"), e=("end_ns", "max"))
        out["step_ms"] = float(((per_step["e"] - per_step["s"]) / 1e6).median())
        ev = t.events
        sync = ev[(ev["name"] == "SYNCHRONIZE") & (ev["ph"] == "X") & (ev["step"] >= 0)]
        waited = sync.groupby(["rank", "step"])["dur_ns"].sum()
        lengths = spans.set_index(["rank", "step"])["end_ns"] - spans.set_index(["rank", "step"])["start_ns"]
        waited = waited.reindex(lengths.index).fillna(0).clip(upper=lengths)  # never more than the step
        if waited.sum() and lengths.sum():
            out["exposed_pct"] = float(100.0 * waited.sum() / lengths.sum())
    comm = comm_ops(t)
    if len(comm):  # the op moving the most bytes; its largest quarter of messages against its peak
        op = comm.groupby("op")["bytes"].sum().idxmax()
        mine = comm[comm["op"] == op]
        peak = peak_gbps or float(mine["busbw"].max())
        out["peak_gbps"], out["busbw_op"] = peak, str(op)
        big = mine[mine["bytes"] >= mine["bytes"].quantile(0.75)]
        out["busbw_eff"] = float(big["busbw"].median() / peak) if peak else None
    last = times_last(lateness(t)) if stragglers is None else stragglers
    if len(last) and last["times_last"].max() > 0:
        row = last.sort_values(["times_last", "wait_imposed_ms"], ascending=False).iloc[0]
        out.update(straggler_rank=int(row["rank"]), straggler_share=float(row["share_last"]),
                   straggler_wait_ms=float(row["wait_imposed_ms"]))
    return out
