"""One rank's events table (:mod:`viewer.ringscope.tables`): spans, instants and counters as written, each
tensor op as one X on the "tensor" thread with its rebuilt NEGOTIATE_<OP>/QUEUE rows nested in it."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

from tracer import vocab as V
from viewer.io.columns import categories, constant, int_na, lut, ns, with_default
from viewer.ringscope import phases


def table(r, ops, rank):
    """The events of one rank (local times)."""
    cols = r.cols
    p, c, ob = r.plain, r.counters, ops["b"]
    n_p, n_o, n_c = len(p), len(ob), len(c)
    tid, tid_ok = cols.ints("tid", 0)
    tids, tid_code = np.unique(tid[p], return_inverse=True)
    thread_p = (np.where(tid_ok[p], tid_code.reshape(-1), -1).astype(np.int32),
                [_thread_name(t) for t in tids.tolist()])
    is_x = r.is_x[p]
    span_dur = np.where(is_x, ns(r.dur[p]), 0)
    op_codes, op_values = cols.codes("args.op")
    si, s_name, s_t, s_dur = phases.rebuilt_rows(r, ops, (op_codes[ob], op_values))
    n_n = len(si)
    t_ns = np.concatenate([ns(r.ts[p]), ns(r.ts[ob]), s_t, ns(r.ts[c])])
    order = np.argsort(t_ns, kind="stable")
    depth = np.concatenate([_depths(thread_p[0], ns(r.ts[p]), span_dur, ~is_x),
                            np.zeros(n_o, dtype="int32"), np.ones(n_n, dtype="int32"),
                            np.zeros(n_c, dtype="int32")])
    name, names = r.name, r.names
    cat, cats = cols.codes("cat")
    tensor = cols.codes("args.tensor")
    bytes_, bytes_ok = cols.ints("args.bytes", 0)
    value = cols.floats("args.value")
    events = {
        "rank": np.full(len(t_ns), rank, dtype="int32"),
        "thread": categories([thread_p, constant(n_o + n_n, "tensor"), constant(n_c, "counter")], order),
        "name": categories([(name[p], names), (name[ob], names), s_name, (name[c], names)], order),
        "cat": categories([(cat[p], cats), with_default(cat[ob], cats, V.CAT_TENSOR),
                        with_default(cat[ob[si]], cats, V.CAT_TENSOR),
                        with_default(cat[c], cats, V.CAT_COUNTER)], order),
        "ph": categories([(np.where(is_x, 0, 1).astype(np.int32), ["X", "i"]), constant(n_o + n_n, "X"),
                       constant(n_c, "C")], order),
        "t_ns": t_ns[order],
        "dur_ns": np.concatenate([span_dur, ns(ops["end_ts"] - r.ts[ob]), s_dur,
                                  np.zeros(n_c, dtype="int64")])[order],
        "tensor": categories([(tensor[0][p], tensor[1]), (ops["aid"], r.aid_values), (ops["aid"][si], r.aid_values),
                           (np.full(n_c, -1, dtype=np.int32), [])], order),
        "step": np.concatenate([_phase_steps(r, p), r.step[ob], r.step[ob[si]], _steps_at(r, r.ts[c])])[order],
        "response": np.concatenate([r.resp[p], ops["resp"], ops["resp"][si], np.full(n_c, -1)])[order],
        "bytes": int_na(np.concatenate([bytes_[p], bytes_[ob], np.zeros(n_n + n_c, dtype="int64")])[order],
                        np.concatenate([bytes_ok[p], bytes_ok[ob], np.zeros(n_n + n_c, dtype=bool)])[order]),
        "value": np.concatenate([np.full(n_p + n_o + n_n, np.nan), value[c]])[order],
        "depth": depth[order],
    }

    return pd.DataFrame(events, copy=False)  # a block per column: the merge of ranks pops them one by one


def _thread_name(tid: int) -> str:
    """The vocabulary's name, ``user:<k>`` for the k-th user thread, else the tid."""
    if tid in V.THREAD_NAMES:
        return V.THREAD_NAMES[tid]
    if V.TID_USER_BASE <= tid < V.TID_TENSOR_BASE:
        return f"user:{tid - V.TID_USER_BASE}"
    return str(tid)


def _steps_at(r, ts):
    """The step of the STEP span holding each time (µs, this rank's), -1 outside every STEP span."""
    steps = r.named(r.plain[r.is_x[r.plain]], V.STEP)
    if not len(steps) or not len(ts):
        return np.full(len(ts), -1, dtype="int64")
    steps = steps[np.argsort(r.ts[steps], kind="stable")]
    start, end = r.ts[steps], r.ts[steps] + r.dur[steps]
    i = np.searchsorted(start, ts, side="right") - 1
    j = np.maximum(i, 0)
    inside = (i >= 0) & (ts < end[j])
    return np.where(inside, r.step[steps][j], -1)


def _phase_steps(r, rows):
    """``args.step``; a phase or region: that of the STEP span holding its start (docs/TRACE_FORMAT.md)."""
    step = r.step[rows]   # a copy
    cat, cats = r.cols.codes("cat")
    framed = lut(cats, lambda v: v in (V.CAT_PHASE, V.CAT_REGION))[cat[rows]]
    step[framed] = _steps_at(r, r.ts[rows[framed]])
    return step


def _depths(thread, ts, dur, inst):
    """Nesting depth of each span and instant on its thread (an instant: that of its enclosing span)."""
    order = np.lexsort((inst, -dur, ts))  # equal start: longer first, instants inside
    ends = (ts + dur).tolist()
    tsl, instl, thr = ts.tolist(), inst.tolist(), thread.tolist()
    stacks: defaultdict = defaultdict(list)
    depth = [0] * len(ts)
    for i in order.tolist():
        st = stacks[thr[i]]
        t = tsl[i]
        while st and st[-1] <= t:
            st.pop()
        depth[i] = len(st)
        if not instl[i]:
            st.append(ends[i])
    return np.asarray(depth, dtype="int32")
