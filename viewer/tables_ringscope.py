"""Turn the columns gathered by :mod:`viewer.load_ringscope` into the schema's per-rank tables."""
from __future__ import annotations

import bisect

from tracer import vocab as V
from viewer import frames


def _ns(us) -> int:
    return int(round(us * 1000))


def _opt_ns(us):
    return None if us is None else _ns(us)


def _int(v, default=None):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def build_tables(p, rank: int) -> dict:
    """``{events, tensor_ops, fused_ops, readiness, cycles}`` DataFrames for one rank (local times)."""
    import numpy as np

    _match_responses(p)
    _add_async_rows(p)
    c = p.cols
    ts = np.asarray(c.pop("ts"), dtype="float64")
    dur = np.asarray(c.pop("dur"), dtype="float64")
    c["t_ns"] = np.rint(ts * 1000).astype("int64")
    c["dur_ns"] = np.rint(dur * 1000).astype("int64")
    c["rank"] = np.full(len(ts), rank, dtype="int32")
    c["depth"] = _depths(c["thread"], c["t_ns"], c["dur_ns"], c["ph"], c.get("_depth"))
    c.pop("_depth", None)
    events = frames.build("events", c)
    events = events.sort_values("t_ns", kind="stable", ignore_index=True)
    return {
        "events": events,
        "tensor_ops": _tensor_ops(p, rank),
        "fused_ops": _fused_ops(p, rank),
        "readiness": _readiness(p),
        "cycles": frames.build("cycles", {
            "rank": [rank] * len(p.cycles), "cycle": [cy for cy, _, _ in p.cycles],
            "start_ns": [_ns(t) for _, t, _ in p.cycles],
            "end_ns": [_ns(t + d) for _, t, d in p.cycles]}),
    }


def _add_async_rows(p) -> None:
    """Per-tensor async lifecycles become X rows on the "tensor" thread (open ones end at the last event)."""
    c = p.cols
    n0 = len(c["name"])
    depth = [None] * n0
    for op in p.ops:
        end = op.get("done", p.last_ts)
        p.row("tensor", op["name"], op["cat"] or V.CAT_TENSOR, "X", op["submit"], end - op["submit"],
              op["args"])
        c["tensor"][-1] = op["tensor"]
        depth.append(0)
        for name, (t0, t1, _a) in op["parts"].items():
            p.row("tensor", name, op["cat"] or V.CAT_TENSOR, "X", t0, (p.last_ts if t1 is None else t1) - t0,
                  op["args"])
            c["tensor"][-1] = op["tensor"]
            c["bytes"][-1] = None
            depth.append(1)
        for name, t0, t1 in _rebuilt_parts(p, op):
            p.row("tensor", name, op["cat"] or V.CAT_TENSOR, "X", t0 / 1000, (t1 - t0) / 1000, op["args"])
            c["tensor"][-1] = op["tensor"]
            c["bytes"][-1] = None
            depth.append(1)
    c["_depth"] = depth


def _match_responses(p) -> None:
    """Set ``op["fused"]`` (index into ``p.fused``, or None) to the response each tensor op ran in: the
    first FUSED_RESPONSE listing its tensor that starts within [submit, done] (done = the end of its
    lifecycle; no upper bound while it never ended). Steps are not used: they repeat and may be -1."""
    by_tensor: dict = {}
    for i, (ts, _dur, a) in enumerate(p.fused):
        for t in a.get(V.ARG_TENSORS) or []:
            if isinstance(t, str):
                by_tensor.setdefault(t, []).append((_ns(ts), i))
    for lst in by_tensor.values():
        lst.sort()
    for op in p.ops:
        op["fused"] = None
        lst = by_tensor.get(op["tensor"])
        if not lst:
            continue
        j = bisect.bisect_left(lst, (_ns(op["submit"]), -1))
        if j < len(lst) and (op.get("done") is None or lst[j][0] <= _ns(op["done"])):
            op["fused"] = lst[j][1]


def _response_phases(p, op):
    """(negotiated_ns, start_ns) of a format-2 op (no nested phase slices) from the response it ran
    in: start = the response's FUSED_RESPONSE start, negotiated = start - its queue_ns. None where
    unknown (no response, no queue_ns, or a format-1 op, whose phases are its own slices)."""
    if op["parts"]:
        return None, None
    if op["fused"] is None:
        # failed before any response: its negotiation lasted until the failure (as format 1 wrote it)
        failed = op["args"].get(V.ARG_ERROR) and op.get("done") is not None
        return (_ns(op["done"]) if failed else None), None
    ts, _dur, a = p.fused[op["fused"]]
    start = _ns(ts)
    q = _int(a.get(V.ARG_QUEUE_NS))
    return (None if q is None else start - q), start


def _rebuilt_parts(p, op):
    """The nested NEGOTIATE_<OP> and QUEUE slices format 1 wrote, rebuilt for a format-2 op:
    ``[(name, t0_ns, t1_ns)]`` (the negotiation when its end is known, the QUEUE when its start
    is known too)."""
    neg, start = _response_phases(p, op)
    if neg is None:
        return []
    out = []
    opname = op["args"].get(V.ARG_OP)
    if isinstance(opname, str):
        out.append((V.negotiate_name(opname), _ns(op["submit"]), neg))
    if start is not None:
        out.append((V.QUEUE, neg, start))
    return out


def _depths(threads, ts, dur, phs, fixed):
    """Nesting depth of each span on its thread (instants/counters: depth of the enclosing span)."""
    import numpy as np

    ts = np.asarray(ts)
    dur = np.asarray(dur)
    n = len(ts)
    out = [0] * n
    inst = np.asarray([ph != "X" for ph in phs], dtype=bool)
    todo = np.ones(n, dtype=bool)
    if fixed is not None:
        for i, f in enumerate(fixed):
            if f is not None:
                out[i] = f
                todo[i] = False
    todo &= np.asarray([ph != "C" for ph in phs], dtype=bool)  # counters sit at depth 0
    sel = np.flatnonzero(todo)
    order = sel[np.lexsort((inst[sel], -dur[sel], ts[sel]))]  # equal start: longer first, instants inside
    ends = (ts + dur).tolist()
    tsl = ts.tolist()
    instl = inst.tolist()
    stacks: dict = {}
    for i in order.tolist():
        st = stacks.get(threads[i])
        if st is None:
            st = stacks[threads[i]] = []
        t = tsl[i]
        while st and st[-1] <= t:
            st.pop()
        out[i] = len(st)
        if not instl[i]:
            st.append(ends[i])
    return np.asarray(out, dtype="int32")


def _tensor_ops(p, rank):
    cols = {k: [] for k in ("tensor", "step", "op", "dtype", "bytes", "process_set", "response",
                            "submit_ns", "negotiated_ns", "start_ns", "done_ns", "wait_ns", "error")}
    for op in p.ops:
        a = op["args"]
        neg = next((v for k, v in op["parts"].items() if k.startswith(V.NEGOTIATE_PREFIX)), None)
        q = op["parts"].get(V.QUEUE)
        step = _int(a.get(V.ARG_STEP), -1)
        opname = a.get(V.ARG_OP)
        if opname is None and neg is not None:
            opname = next(k for k in op["parts"] if k.startswith(V.NEGOTIATE_PREFIX))[len(V.NEGOTIATE_PREFIX):]
        cols["tensor"].append(op["tensor"])
        cols["step"].append(step)
        cols["op"].append(opname)
        cols["dtype"].append(a.get(V.ARG_DTYPE))
        cols["bytes"].append(_int(a.get(V.ARG_BYTES)))
        cols["process_set"].append(_int(a.get(V.ARG_PROCESS_SET), 0))
        ran_in = p.fused[op["fused"]][2] if op["fused"] is not None else {}
        cols["response"].append(_int(a.get(V.ARG_RESPONSE), _int(ran_in.get(V.ARG_RESPONSE), -1)))
        cols["submit_ns"].append(_ns(op["submit"]))
        neg2, start2 = _response_phases(p, op)
        cols["negotiated_ns"].append(_opt_ns(neg[1]) if neg else neg2)
        cols["start_ns"].append(_opt_ns(q[1]) if q else start2)
        err = a.get(V.ARG_ERROR)
        cols["done_ns"].append(None if err else _opt_ns(op.get("done")))
        cols["wait_ns"].append(None)
        cols["error"].append(str(err) if err else None)
    cols["rank"] = [rank] * len(cols["tensor"])
    df = frames.build("tensor_ops", cols)
    if len(df):
        df["occurrence"] = df.groupby("tensor").cumcount().astype("int64")
    if p.syncs and len(df):
        _attach_waits(df, p.syncs)
    return df


def _attach_waits(df, syncs):
    """Framework SYNCHRONIZE time per tensor op: by (tensor, step), else the latest op of that tensor
    submitted before the wait began."""
    import pandas as pd

    key, by_tensor = {}, {}
    submits = df["submit_ns"].tolist()
    for i, (t, s) in enumerate(zip(df["tensor"].tolist(), df["step"].tolist())):
        key.setdefault((t, s), i)
        by_tensor.setdefault(t, []).append((submits[i], i))
    for lst in by_tensor.values():
        lst.sort()
    waits = [None] * len(df)
    for ts, dur, tens, step in syncs:
        names = [tens] if isinstance(tens, str) else list(tens or [])
        for name in names:
            i = key.get((name, step)) if step >= 0 else None
            if i is None:
                lst = by_tensor.get(name, [])
                j = bisect.bisect_right(lst, (_ns(ts), len(submits))) - 1
                i = lst[j][1] if j >= 0 else None
            if i is not None:
                waits[i] = (waits[i] or 0) + _ns(dur)
    df["wait_ns"] = pd.array(waits, dtype="Int64")


def _fused_ops(p, rank):
    by_resp_mem, by_resp_act = {}, {}
    for m in p.memcpy:
        by_resp_mem.setdefault(m[3], []).append(m)
    for a in p.activity:
        by_resp_act.setdefault(a[3], []).append(a)
    act_sorted = sorted(p.activity, key=lambda a: a[1])
    act_starts = [a[1] for a in act_sorted]
    mem_sorted = sorted(p.memcpy, key=lambda m: m[1])
    mem_starts = [m[1] for m in mem_sorted]
    rows = {k: [] for k in ("response", "step", "op", "backend", "activity", "dtype", "count", "bytes",
                            "threshold", "start_ns", "end_ns", "memcpy_in_ns", "memcpy_out_ns",
                            "comm_ns", "size", "tensors")}
    for ts, dur, a in p.fused:
        rid = _int(a.get(V.ARG_RESPONSE), -1)
        mems = by_resp_mem.get(rid) if rid >= 0 else None
        if mems is None:
            mems = _within(mem_sorted, mem_starts, ts, ts + dur)
        acts = by_resp_act.get(rid) if rid >= 0 else None
        if acts is None:
            acts = _within(act_sorted, act_starts, ts, ts + dur)
        act = acts[0] if acts else None
        tensors = list(a.get(V.ARG_TENSORS) or [])
        rows["response"].append(rid)
        rows["step"].append(_int(a.get(V.ARG_STEP), -1))
        rows["op"].append(a.get(V.ARG_OP))
        rows["backend"].append(a.get(V.ARG_BACKEND) or (act[4].get(V.ARG_BACKEND) if act else None))
        rows["activity"].append(act[0] if act else None)
        rows["dtype"].append(a.get(V.ARG_DTYPE))
        rows["count"].append(_int(a.get(V.ARG_COUNT), len(tensors)))
        rows["bytes"].append(_int(a.get(V.ARG_BYTES), 0))
        rows["threshold"].append(_int(a.get(V.ARG_THRESHOLD)))
        rows["start_ns"].append(_ns(ts))
        rows["end_ns"].append(_ns(ts + dur))
        rows["memcpy_in_ns"].append(sum(_ns(m[2]) for m in mems if m[0] == V.MEMCPY_IN_FUSION_BUFFER))
        rows["memcpy_out_ns"].append(sum(_ns(m[2]) for m in mems if m[0] == V.MEMCPY_OUT_FUSION_BUFFER))
        rows["comm_ns"].append(_ns(act[2]) if act else 0)
        rows["size"].append(_int(act[4].get("size"), _int(a.get("size"), 0)) if act else _int(a.get("size"), 0))
        rows["tensors"].append(tensors)
    rows["rank"] = [rank] * len(rows["response"])
    return frames.build("fused_ops", rows)


def _within(items, starts, t0, t1):
    lo = bisect.bisect_left(starts, t0)
    out = []
    for it in items[lo:]:
        if it[1] > t1:
            break
        out.append(it)
    return out


def _readiness(p):
    df = frames.build("readiness", {
        "tensor": [r[0] for r in p.ready], "step": [r[1] for r in p.ready],
        "occurrence": [0] * len(p.ready), "rank": [r[2] for r in p.ready],
        "ready_ns": [_ns(r[3]) for r in p.ready], "source": ["ringscope"] * len(p.ready)})
    if len(df):
        df["occurrence"] = df.groupby(["tensor", "rank"]).cumcount().astype("int64")
    return df
