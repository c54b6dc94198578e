"""Vectorised construction of one rank's tables from the flat event columns of :mod:`viewer.fast_ringscope`.

Async b/e events of one (id, name) alternate in time (a tensor name is in flight at most once), so the
k-th begin pairs with the k-th end; the k-th NEGOTIATE/QUEUE of a tensor belongs to its k-th lifecycle.
"""
from __future__ import annotations

import numpy as np

from tracer import vocab as V
from viewer import frames


_ASYNC_ONLY = ("id", "id2.local", "id2.global", "pid")
_ASYNC_COLS = ["ph", "name", "cat", "ts", "args.tensor", "args.step", "args.response", "args.bytes", "args.op",
               "args.dtype", "args.process_set", "args.error"]


def _ns(series):
    return np.rint(series.to_numpy(dtype="float64", na_value=0.0) * 1000).astype("int64")


def _int(series, default):
    return series.fillna(default).to_numpy(dtype="int64")


def build(df, rank: int) -> dict:
    """``{events, tensor_ops, fused_ops, readiness, cycles, _last_ts_us, _shutdown}``."""
    import pandas as pd

    from viewer.fast_ringscope import Fallback

    df["ts"] = df["ts"].fillna(0.0)
    df["dur"] = df["dur"].fillna(0.0)
    ph = df["ph"]
    is_span = ph.isin(["X", "i", "I", "n"]).to_numpy()
    is_async = ph.isin(["b", "e"]).to_numpy()
    is_counter = (ph == "C").to_numpy()
    is_x = (ph == "X").to_numpy()
    ends = df["ts"].to_numpy() + np.where(is_x, df["dur"].to_numpy(), 0.0)
    last_ts = float(ends.max()) if len(df) else 0.0
    # copy only the columns each part needs (boolean row selection copies every column it keeps)
    plain = df.loc[is_span, [c for c in df.columns if c not in _ASYNC_ONLY]]
    aid = df["id2.local"].fillna(df["id2.global"]).fillna(df["id"]) if "id2.local" in df else df["id"]
    asy = df.loc[is_async, _ASYNC_COLS].assign(aid=aid[is_async])
    counters = df.loc[is_counter, ["name", "cat", "ts", "args.value"]]
    del df, aid
    outer, parts = _pair_async(asy, last_ts)
    del asy

    names = plain["name"]
    x = plain[plain["ph"] == "X"]
    spans = _span_rows(plain)
    ev = pd.concat([spans, _async_rows(outer, parts), _counter_rows(counters)], ignore_index=True)
    ev["rank"] = np.int32(rank)
    ev["depth"] = _depths(ev)
    events = frames.conform("events", ev).sort_values("t_ns", kind="stable", ignore_index=True)

    fused = x[x["name"] == V.FUSED_RESPONSE]
    fused_ops = _fused(fused, x, rank)
    if fused_ops is None:
        raise Fallback("memcpy/activity spans without response ids")
    tensor_ops = _tensor_ops(outer, parts, fused, x[x["name"] == V.SYNCHRONIZE], rank)
    ready = plain[names == V.READY]
    readiness = frames.build("readiness", {
        "tensor": ready["args.tensor"].tolist(), "step": _int(ready["args.step"], -1),
        "occurrence": np.zeros(len(ready), dtype="int64"), "rank": _int(ready["args.rank"], -1),
        "ready_ns": _ns(ready["ts"]), "source": ["ringscope"] * len(ready)})
    if len(readiness):
        readiness["occurrence"] = readiness.groupby(["tensor", "rank"]).cumcount().astype("int64")
    cyc = x[x["name"] == V.CYCLE]
    cycles = frames.build("cycles", {"rank": np.full(len(cyc), rank, dtype="int32"),
                                     "cycle": _int(cyc["args.cycle"], -1), "start_ns": _ns(cyc["ts"]),
                                     "end_ns": _ns(cyc["ts"] + cyc["dur"])})
    sd = plain[names == V.SHUTDOWN]
    shutdown = {}
    if len(sd):
        row = sd.iloc[-1]
        for k in ("clock_offset_ns", "clock_offset_uncertainty_ns", "events_dropped"):
            v = row.get(f"args.{k}")
            if v is not None and not pd.isna(v):
                shutdown[k] = int(v)
    return {"events": events, "tensor_ops": tensor_ops, "fused_ops": fused_ops, "readiness": readiness,
            "cycles": cycles, "_last_ts_us": last_ts, "_shutdown": shutdown,
            "_pid": None}


def _span_rows(plain):
    import pandas as pd

    tid = plain["tid"]
    thread = tid.map(V.THREAD_NAMES)
    thread = thread.where(thread.notna(), tid.astype("string"))
    is_x = (plain["ph"] == "X").to_numpy()
    return pd.DataFrame({
        "thread": thread.astype("string").to_numpy(), "name": plain["name"].to_numpy(),
        "cat": plain["cat"].to_numpy(), "ph": np.where(is_x, "X", "i"), "t_ns": _ns(plain["ts"]),
        "dur_ns": np.where(is_x, _ns(plain["dur"]), 0), "tensor": plain["args.tensor"].to_numpy(),
        "step": _int(plain["args.step"], -1), "response": _int(plain["args.response"], -1),
        "bytes": plain["args.bytes"].to_numpy(), "value": np.full(len(plain), np.nan)})


def _counter_rows(c):
    import pandas as pd

    return pd.DataFrame({
        "thread": "counter", "name": c["name"].to_numpy(), "cat": c["cat"].fillna(V.CAT_COUNTER).to_numpy(),
        "ph": "C", "t_ns": _ns(c["ts"]), "dur_ns": np.zeros(len(c), dtype="int64"),
        "tensor": pd.array([None] * len(c), dtype="string"), "step": -1, "response": -1,
        "bytes": pd.array([None] * len(c), dtype="Int64"),
        "value": c["args.value"].to_numpy(dtype="float64", na_value=np.nan)})


def _pair_async(asy, last_ts):
    """(outer lifecycles, nested parts): one row per begin, with its end time (NaN when open)."""
    asy = asy.assign(nested=asy["name"].str.startswith(V.NEGOTIATE_PREFIX) | (asy["name"] == V.QUEUE))
    asy = asy.assign(k=asy.groupby(["aid", "name", "ph"], sort=False).cumcount())
    b = asy[asy["ph"] == "b"]
    e = asy[asy["ph"] == "e"][["aid", "name", "k", "ts", "args.response", "args.error"]].rename(
        columns={"ts": "end_ts", "args.response": "end_response", "args.error": "end_error"})
    pairs = b.merge(e, on=["aid", "name", "k"], how="left", sort=False)
    pairs["closed"] = pairs["end_ts"].notna()
    pairs["end_ts"] = pairs["end_ts"].fillna(last_ts)
    outer = pairs[~pairs["nested"]].reset_index(drop=True)
    parts = pairs[pairs["nested"]].reset_index(drop=True)
    # k-th nested phase of a tensor belongs to its k-th lifecycle
    parts = parts.assign(k=parts.groupby(["aid", "name"], sort=False).cumcount())
    outer = outer.assign(k=outer.groupby("aid", sort=False).cumcount())
    return outer, parts


def _async_rows(outer, parts):
    import pandas as pd

    rows = []
    if len(parts):  # nested phases carry their lifecycle's step (as the Python parser does)
        st = outer[["aid", "k", "args.step"]].assign(
            outer_resp=outer["args.response"].fillna(outer["end_response"])).rename(
            columns={"args.step": "outer_step"})
        parts = parts.merge(st, on=["aid", "k"], how="left", sort=False)
        parts["args.step"] = parts["outer_step"].fillna(parts["args.step"])
    for df, depth in ((outer, 0), (parts, 1)):
        if not len(df):
            continue
        resp = df["args.response"].fillna(df["end_response"]) if depth == 0 else df["outer_resp"]
        rows.append(pd.DataFrame({
            "thread": "tensor", "name": df["name"].to_numpy(), "cat": df["cat"].fillna(V.CAT_TENSOR).to_numpy(),
            "ph": "X", "t_ns": _ns(df["ts"]), "dur_ns": _ns(df["end_ts"] - df["ts"]),
            "tensor": df["aid"].to_numpy(), "step": _int(df["args.step"], -1), "response": _int(resp, -1),
            "bytes": df["args.bytes"].to_numpy() if depth == 0 else pd.array([None] * len(df), dtype="Int64"),
            "value": np.full(len(df), np.nan), "_depth": depth}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _depths(ev):
    """Nesting depth per thread (async rows carry theirs)."""
    from viewer.tables_ringscope import _depths as depths_loop

    fixed = ev["_depth"].tolist() if "_depth" in ev else None
    if fixed is not None:
        fixed = [None if d != d else int(d) for d in fixed]
        del ev["_depth"]
    ts = ev["t_ns"].to_numpy(dtype="int64")
    dur = ev["dur_ns"].to_numpy(dtype="int64")
    return depths_loop(ev["thread"].tolist(), ts, dur, ev["ph"].tolist(), fixed)


def _fused(fused, x, rank):
    import pandas as pd

    resp = _int(fused["args.response"], -1)
    mem = x[x["name"].isin([V.MEMCPY_IN_FUSION_BUFFER, V.MEMCPY_OUT_FUSION_BUFFER])]
    act = x[x["name"].isin(list(V.COMM_ACTIVITIES))]
    if (mem["args.response"].isna().any() or act["args.response"].isna().any()) and len(fused):
        return None
    f = pd.DataFrame({"r": resp})
    for nm, col in ((V.MEMCPY_IN_FUSION_BUFFER, "m_in"), (V.MEMCPY_OUT_FUSION_BUFFER, "m_out")):
        m = mem[mem["name"] == nm]
        s = pd.DataFrame({"r": _int(m["args.response"], -1), col: _ns(m["dur"])}).groupby("r", as_index=False).sum()
        f = f.merge(s, on="r", how="left")
    a = act.drop_duplicates("args.response")
    a = pd.DataFrame({"r": _int(a["args.response"], -1), "a_name": a["name"].astype(object).to_numpy(),
                      "a_dur": _ns(a["dur"]), "a_size": a["args.size"].to_numpy(dtype="float64", na_value=np.nan),
                      "a_backend": a["args.backend"].astype(object).to_numpy()})
    f = f.merge(a, on="r", how="left")
    m_in = f["m_in"].fillna(0).astype("int64").to_numpy()
    m_out = f["m_out"].fillna(0).astype("int64").to_numpy()
    a_name = f["a_name"].where(f["a_name"].notna(), None).tolist()
    a_dur = f["a_dur"].fillna(0).astype("int64").to_numpy()
    f_size = fused["args.size"].to_numpy(dtype="float64", na_value=np.nan)
    size = np.where(np.isnan(f["a_size"].to_numpy()), np.nan_to_num(f_size, nan=0.0), f["a_size"].to_numpy())
    size = size.astype("int64")
    backend = fused["args.backend"].astype(object).where(fused["args.backend"].notna(), None).tolist()
    backend = [b if b is not None else (ab if isinstance(ab, str) else None)
               for b, ab in zip(backend, f["a_backend"].tolist())]
    tensors = [list(t) if t is not None else [] for t in fused["args.tensors"].tolist()]
    count = [int(c) if c is not None and not pd.isna(c) else len(t)
             for c, t in zip(fused["args.count"].tolist(), tensors)]
    return frames.build("fused_ops", {
        "rank": np.full(len(fused), rank, dtype="int32"), "response": resp,
        "step": _int(fused["args.step"], -1), "op": fused["args.op"].tolist(), "backend": backend,
        "activity": a_name, "dtype": fused["args.dtype"].tolist(), "count": count,
        "bytes": _int(fused["args.bytes"], 0), "threshold": fused["args.threshold"].tolist(),
        "start_ns": _ns(fused["ts"]), "end_ns": _ns(fused["ts"] + fused["dur"]), "memcpy_in_ns": m_in,
        "memcpy_out_ns": m_out, "comm_ns": a_dur, "size": size, "tensors": tensors})


def _tensor_ops(outer, parts, fused, syncs, rank):
    import pandas as pd

    if not len(outer):
        return frames.empty("tensor_ops")
    o = outer
    neg = parts[parts["name"].str.startswith(V.NEGOTIATE_PREFIX)][["aid", "k", "name", "end_ts", "closed"]]
    neg = neg.rename(columns={"name": "neg_name", "end_ts": "neg_end", "closed": "neg_closed"})
    q = parts[parts["name"] == V.QUEUE][["aid", "k", "end_ts", "closed"]].rename(
        columns={"end_ts": "q_end", "closed": "q_closed"})
    o = o.merge(neg, on=["aid", "k"], how="left", sort=False).merge(q, on=["aid", "k"], how="left", sort=False)
    step = _int(o["args.step"], -1)
    # response: on the lifecycle's args, else from the fused response listing this tensor in that step
    resp = o["args.response"].fillna(o["end_response"])
    if len(fused):
        lst = pd.DataFrame({"tensor": fused["args.tensors"].tolist(), "step": _int(fused["args.step"], -1),
                            "r": _int(fused["args.response"], -1)}).explode("tensor").dropna(subset=["tensor"])
        lst = lst.drop_duplicates(["tensor", "step"])
        lk = pd.DataFrame({"tensor": o["aid"].astype(object).to_numpy(), "step": step})
        lk = lk.merge(lst.astype({"tensor": object}), on=["tensor", "step"], how="left")
        resp = resp.fillna(pd.Series(lk["r"].to_numpy(), index=resp.index))
    op = o["args.op"].astype("object")
    op = op.where(op.notna(), o["neg_name"].astype("object").str.slice(len(V.NEGOTIATE_PREFIX)))
    neg_ns = pd.array(np.where(o["neg_closed"].fillna(False).to_numpy(dtype=bool), _ns(o["neg_end"]), 0),
                      dtype="Int64")
    neg_ns[~o["neg_closed"].fillna(False).to_numpy(dtype=bool)] = pd.NA
    q_ok = o["q_closed"].fillna(False).to_numpy(dtype=bool)
    start_ns = pd.array(_ns(o["q_end"]), dtype="Int64")
    start_ns[~q_ok] = pd.NA
    err = o["end_error"].fillna(o["args.error"])
    done_ns = pd.array(_ns(o["end_ts"]), dtype="Int64")
    done_ns[~o["closed"].to_numpy(dtype=bool) | err.notna().to_numpy()] = pd.NA
    df = frames.build("tensor_ops", {
        "rank": np.full(len(o), rank, dtype="int32"), "tensor": o["aid"].tolist(), "step": step,
        "occurrence": o["k"].to_numpy(dtype="int64"), "op": op.tolist(), "dtype": o["args.dtype"].tolist(),
        "bytes": o["args.bytes"].tolist(), "process_set": _int(o["args.process_set"], 0),
        "response": _int(resp, -1), "submit_ns": _ns(o["ts"]), "negotiated_ns": neg_ns, "start_ns": start_ns,
        "done_ns": done_ns, "wait_ns": [None] * len(o), "error": err.tolist()})
    if len(syncs):
        from viewer.tables_ringscope import _attach_waits

        tens = syncs["args.tensor"].astype("object").where(syncs["args.tensor"].notna(), None).tolist()
        lists = syncs["args.tensors"].tolist() if "args.tensors" in syncs else [None] * len(syncs)
        tens = [t if t is not None else (list(lst) if lst is not None else None) for t, lst in zip(tens, lists)]
        _attach_waits(df, list(zip(syncs["ts"].tolist(), syncs["dur"].tolist(), tens,
                                   _int(syncs["args.step"], -1).tolist())))
    return df
