"""The critical path of each step: the chain of phases and collectives, across ranks, that set it."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer import vocab as VOCAB

COLUMNS = ["step", "order", "rank", "kind", "name", "thread", "depth", "start_ns", "end_ns", "dur_ns", "slowest"]
_TOLERANCE_NS = 1_000   # a SYNCHRONIZE ends a little after the collective it waited for


def critical_path(tables, bd=None):
    """Per step, the critical path in time order; ``slowest``: the phase furthest over the others'."""
    ev, fo, ops = tables.events_without_ops, tables.fused_ops, tables.tensor_ops
    empty = pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS})
    sel = ((ev["ph"] == "X") & (ev["name"] == V.SYNCHRONIZE) & (ev["step"] >= 0)).to_numpy(dtype=bool, na_value=False)
    sync = ev.loc[sel, ["rank", "step", "t_ns", "dur_ns", "thread", "depth"]].copy()
    if not len(sync) or not len(fo) or not len(ops):
        return empty
    sync["end_ns"] = sync["t_ns"] + sync["dur_ns"]
    last = sync.sort_values("end_ns", kind="stable").groupby("step").tail(1)   # what ended each step
    # the collective each waited for: the last fused op of that step on that rank ending by then
    f = fo[fo["step"] >= 0][["rank", "step", "response", "activity", "start_ns", "end_ns"]]
    f = f.merge(last[["rank", "step", "end_ns"]].rename(columns={"end_ns": "sync_end"}), on=["rank", "step"])
    f = f[f["end_ns"] <= f["sync_end"] + _TOLERANCE_NS].sort_values("end_ns", kind="stable")
    f = f.groupby("step").tail(1)
    if not len(f):
        return empty
    # who closed its negotiation: the latest submission of any tensor of that response
    o = ops[ops["response"].isin(f["response"])][["rank", "tensor", "response", "submit_ns", "negotiated_ns"]]
    o = o.sort_values("submit_ns", kind="stable").groupby("response").tail(1)
    chain = f.merge(o.rename(columns={"rank": "late_rank"}), on="response")
    if not len(chain):
        return empty
    rows = []
    for c in chain.itertuples(index=False):
        neg_end = c.start_ns if pd.isna(c.negotiated_ns) else c.negotiated_ns
        rows.append((c.step, 2, c.late_rank, "negotiation", c.tensor, "tensor", 1, c.submit_ns, int(neg_end)))
        rows.append((c.step, 3, c.rank, "collective", c.activity if isinstance(c.activity, str) else
                     V.FUSED_RESPONSE, "fusion", 0, c.start_ns, c.end_ns))
    for s in last.merge(chain[["step"]], on="step").itertuples(index=False):
        rows.append((s.step, 4, s.rank, "synchronize", V.SYNCHRONIZE, s.thread, s.depth, s.t_ns, s.end_ns))
    out = pd.DataFrame(rows, columns=COLUMNS[:2] + ["rank", "kind", "name", "thread", "depth", "start_ns", "end_ns"])
    out = pd.concat([_pre_submit(ev, chain), out], ignore_index=True)
    out["dur_ns"] = out["end_ns"] - out["start_ns"]
    out = out.sort_values(["step", "order", "start_ns"], kind="stable", ignore_index=True)
    out["order"] = out.groupby("step").cumcount()
    pre = out[out["kind"] == "phase"]
    key = pre["dur_ns"].astype("float64") - _others_median(bd, pre)
    out["slowest"] = out.index.isin(key.sort_values(kind="stable").groupby(pre["step"]).tail(1).index)
    return out.astype({"step": "int64", "order": "int64", "rank": "int64", "depth": "int64", "start_ns": "int64",
                       "end_ns": "int64", "dur_ns": "int64"})[COLUMNS]


def _pre_submit(ev, chain):
    """The late rank's phases before its submission, clipped to it (else its STEP span as ``pre-submit``)."""
    sel = ((ev["ph"] == "X") & ((ev["cat"] == V.CAT_PHASE) | (ev["name"] == V.STEP))).to_numpy(dtype=bool,
                                                                                               na_value=False)
    x = ev.loc[sel, ["rank", "step", "name", "cat", "t_ns", "dur_ns", "thread", "depth"]]
    want = chain[["step", "late_rank", "submit_ns"]].rename(columns={"late_rank": "rank"})
    x = x.merge(want, on=["rank", "step"])
    x = x[x["t_ns"] < x["submit_ns"]]
    x = x.assign(end_ns=(x["t_ns"] + x["dur_ns"]).clip(upper=x["submit_ns"]))
    is_phase = x["cat"] == V.CAT_PHASE
    phases = x[is_phase & (x["name"] != V.OPTIMIZER_STEP)]
    with_phases = set(zip(phases["rank"], phases["step"]))
    no_phase = [k not in with_phases for k in zip(x["rank"], x["step"])]
    bare = x[(x["name"] == V.STEP).to_numpy(dtype=bool, na_value=False) & np.asarray(no_phase, dtype=bool)]
    out = pd.concat([phases.assign(kind="phase", order=1), bare.assign(kind="pre-submit", order=1)])
    return out.rename(columns={"t_ns": "start_ns"})[["step", "order", "rank", "kind", "name", "thread", "depth",
                                                     "start_ns", "end_ns"]]


_BUCKET_OF = {p.span: p.bucket for p in VOCAB.FRAMEWORK}


def _others_median(bd, pre):
    """Per phase row: the other ranks' median of that bucket in that step (0 without a breakdown)."""
    if bd is None or not len(pre) or not len(bd):
        return np.zeros(len(pre))
    b = bd[bd["phases_known"]].melt(id_vars=["rank", "step"], value_vars=list(_BUCKET_OF.values()),
                                    var_name="col", value_name="v")
    q = pd.DataFrame({"row": np.arange(len(pre)), "me": pre["rank"].to_numpy(), "step": pre["step"].to_numpy(),
                      "col": pre["name"].map(_BUCKET_OF).to_numpy()})
    j = q.merge(b, on=["step", "col"])
    j = j[j["rank"] != j["me"]]
    med = j.groupby("row")["v"].median()
    out = np.zeros(len(pre))
    out[med.index.to_numpy()] = med.astype("float64").to_numpy()
    return np.nan_to_num(out)


def slowest(path, top: int):
    """The critical-path rows of the ``top`` longest steps (from the path's first start to its end)."""
    if path is None or not len(path):
        return path
    g = path.groupby("step")
    span = (g["end_ns"].max() - g["start_ns"].min()).sort_values(ascending=False, kind="stable")
    return path[path["step"].isin(span.index[:top])].reset_index(drop=True)
