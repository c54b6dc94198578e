"""Collectives, tensors and GPU kernels of two runs, matched, per step: what moved most (the movers)."""
from __future__ import annotations

import numpy as np
import pandas as pd

OP_COLUMNS = ["op", "a_count", "b_count", "a_bytes", "b_bytes", "a_ms", "b_ms", "delta_ms", "a_busbw_gbps",
              "b_busbw_gbps", "a_tensors_per_op", "b_tensors_per_op", "a_fill", "b_fill"]
MOVER_COLUMNS = ["kind", "name", "matched_by", "a_ms", "b_ms", "delta_ms", "delta_pct", "a_bytes", "b_bytes"]
NAME_MATCH_SHARE = 0.5   # fewer of A's names than this (by time) in B: match by position and size instead
TOP_MOVERS = 5


def per_step(run, steps) -> tuple[pd.Series | None, int]:
    """The steps an op is counted in (None: every op, a run without step marks) and how many "steps" that is:
    the steady steps, else the times the most frequent tensor name ran on a rank (Horovod has no steps)."""
    if len(steps):
        return steps, len(steps)
    ops = run.tensor_ops
    if not len(ops):
        return None, 1
    return None, max(int(ops.groupby(["rank", "tensor"]).size().max()), 1)


def _in(df, keep):
    return df if keep is None else df[df["step"].isin(keep)]


def op_table(run, steps) -> pd.DataFrame:
    """Per op kind, per step and rank: fused ops, bytes, time; median busbw, tensors per op, median fill."""
    keep, n = per_step(run, steps)
    fo = _in(run.fused_ops, keep)
    cols = ["op", "count", "bytes", "ms", "busbw_gbps", "tensors_per_op", "fill"]
    if not len(fo):
        return pd.DataFrame(columns=cols)
    ranks = max(int(fo["rank"].nunique()), 1)
    t = fo["comm_ns"].where(fo["comm_ns"] > 0, fo["end_ns"] - fo["start_ns"]).astype("float64")
    d = fo.assign(op=fo["op"].fillna("?"), t=t)
    fill = None
    if run.why_not("fusion_ops") is None:
        f = _in(run.fusion_ops(), keep)
        fill = f.groupby(f["op"].fillna("?"))["fill_ratio"].median()
    busbw = None
    if run.why_not("op_bandwidth") is None:
        bw = _in(run.op_bandwidth(), keep)
        busbw = bw[bw["bytes"] > 0].groupby(bw["op"].fillna("?"))["busbw_gbps"].median()
    g = d.groupby("op")
    out = pd.DataFrame({"count": g.size() / n / ranks, "bytes": g["bytes"].sum() / n / ranks,
                        "ms": g["t"].sum() / n / ranks / 1e6, "tensors_per_op": g["count"].mean()})
    out["busbw_gbps"] = busbw if busbw is not None else np.nan
    out["fill"] = fill if fill is not None else np.nan
    return out.reset_index()[cols]


def compare_ops(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """A's and B's :func:`op_table` side by side (an op one run lacks: zero there)."""
    m = a.merge(b, on="op", how="outer", suffixes=("_a", "_b"))
    out = pd.DataFrame({"op": m["op"]})
    for c in ("count", "bytes", "ms", "busbw_gbps", "tensors_per_op", "fill"):
        av, bv = m[f"{c}_a"].astype("float64"), m[f"{c}_b"].astype("float64")
        zero = c in ("count", "bytes", "ms")   # an op a run lacks: none of it there; its medians unknown
        out[f"a_{c}"], out[f"b_{c}"] = (av.fillna(0), bv.fillna(0)) if zero else (av, bv)
    out["delta_ms"] = out["b_ms"] - out["a_ms"]
    return out.sort_values("delta_ms", key=abs, ascending=False, ignore_index=True)[OP_COLUMNS]


def _tensor_keys(ops: pd.DataFrame) -> pd.Series:
    """Each op's key by position and size: its op, its place among its rank's ops of that op in its step
    (its occurrence where there are no steps), and its bytes."""
    when = ops["step"].where(ops["step"] >= 0, ops["occurrence"])
    order = ops.assign(when=when).sort_values("submit_ns", kind="stable")
    pos = order.groupby(["rank", "when", "op"], dropna=False).cumcount()
    pos = pos.reindex(ops.index)
    size = (" (" + ops["bytes"].astype("string") + " B)").fillna("")
    return ops["op"].fillna("?") + " #" + pos.astype(str) + size


def tensor_table(run, steps, by_position: bool) -> pd.DataFrame:
    """Per tensor (name, or position and size): time in flight (submit to result) and bytes, per step and rank."""
    keep, n = per_step(run, steps)
    ops = _in(run.tensor_ops, keep)
    if not len(ops):
        return pd.DataFrame(columns=["name", "ms", "bytes"])
    ranks = max(int(ops["rank"].nunique()), 1)
    end = ops["done_ns"].fillna(ops["end_ns"]).fillna(ops["submit_ns"]).astype("int64")
    key = _tensor_keys(ops) if by_position else ops["tensor"].astype("string")
    d = pd.DataFrame({"name": key.to_numpy(), "t": (end - ops["submit_ns"]).to_numpy(dtype="float64"),
                      "bytes": ops["bytes"].astype("float64").to_numpy()})
    g = d.groupby("name")
    return pd.DataFrame({"ms": g["t"].sum() / n / ranks / 1e6, "bytes": g["bytes"].sum() / n / ranks}).reset_index()


def kernel_table(run, steps) -> pd.DataFrame:
    """Per GPU kernel name (a Kineto run): its time on the GPU per step and rank."""
    if run.why_not("kineto_steps") is not None:
        return pd.DataFrame(columns=["name", "ms", "bytes"])
    from viewer.kineto.kernels import gpu_work

    w = _in(gpu_work(run.tables, include_last_step=True, hta_rounding=False), steps if len(steps) else None)
    n, ranks = max(len(steps), 1), max(int(w["rank"].nunique()), 1)
    g = w.assign(t=(w["end_ns"] - w["t_ns"]).astype("float64")).groupby(w["name"].astype(str))
    return pd.DataFrame({"ms": g["t"].sum() / n / ranks / 1e6, "bytes": np.nan}).rename_axis("name").reset_index()


def _names_match(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if not len(a):
        return True
    total = float(a["ms"].sum())
    shared = float(a.loc[a["name"].isin(set(b["name"])), "ms"].sum())
    return total <= 0 or shared / total >= NAME_MATCH_SHARE


def _side_by_side(kind, a, b, matched_by) -> pd.DataFrame:
    m = a.merge(b, on="name", how="outer", suffixes=("_a", "_b"))
    out = pd.DataFrame({"kind": kind, "name": m["name"], "matched_by": matched_by,
                        "a_ms": m["ms_a"].astype("float64").fillna(0), "b_ms": m["ms_b"].astype("float64").fillna(0),
                        "a_bytes": m["bytes_a"].astype("float64"), "b_bytes": m["bytes_b"].astype("float64")})
    out["delta_ms"] = out["b_ms"] - out["a_ms"]
    out["delta_pct"] = np.where(out["a_ms"] > 0, 100.0 * out["delta_ms"] / out["a_ms"].where(out["a_ms"] > 0, 1),
                                np.nan)
    return out[MOVER_COLUMNS]


def movers(ra, rb, a_steps, b_steps) -> pd.DataFrame:
    """Tensors (by name, else by position and size) and GPU kernels by name, the biggest change per step first."""
    parts = []
    ta, tb = tensor_table(ra, a_steps, False), tensor_table(rb, b_steps, False)
    if _names_match(ta, tb):
        parts.append(_side_by_side("tensor", ta, tb, "name"))
    else:
        parts.append(_side_by_side("tensor", tensor_table(ra, a_steps, True), tensor_table(rb, b_steps, True),
                                   "position and size"))
    ka, kb = kernel_table(ra, a_steps), kernel_table(rb, b_steps)
    if len(ka) or len(kb):
        parts.append(_side_by_side("kernel", ka, kb, "name"))
    out = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else \
        pd.DataFrame(columns=MOVER_COLUMNS)
    return out.sort_values("delta_ms", key=abs, ascending=False, ignore_index=True)
